"""`hitl worker` stops promptly: RQ's command listener must not hold a warm shutdown for its one-minute wait."""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.client import PubSub
from rq import Queue, SimpleWorker
from rq.worker import BaseWorker

from engine.executors import RQExecutor
from engine.protocol import api_key_principal
from engine.sessions import open_session
from gateway.compose import build_runtime
from gateway.rqworker import WORKER_CLASSES
from gateway.settings import Settings
from tests.conftest import API_KEYS, TEST_AGENT, Stack, WorkerProcess, truncate_all, worker_env
from tests.support.agent import read_ledger, script, started, wait_for

PROMPT = 5.0
"""Seconds: far below the listener's 60 s wait, far above a round trip to Redis."""


def unsubscribe_time(worker_class: type[BaseWorker], redis_url: str, monkeypatch: pytest.MonkeyPatch) -> float:
    """How long `unsubscribe()` takes when the listener reads the UNSUBSCRIBE reply before the worker goes on
    (the order a busy machine can give), up to 2 * PROMPT."""
    original = PubSub.unsubscribe

    def reply_read_first(self: PubSub, *args: Any, **kwargs: Any) -> Any:
        sent = original(self, *args, **kwargs)
        time.sleep(0.5)  # the listener thread reads the reply meanwhile and, unless told to stop, waits again
        return sent

    monkeypatch.setattr(PubSub, "unsubscribe", reply_read_first)
    connection = Redis.from_url(redis_url)
    worker = worker_class([Queue(f"test-{uuid.uuid4().hex[:12]}", connection=connection)], connection=connection)
    worker.subscribe()
    time.sleep(0.2)  # the listener is waiting for a message
    started = time.monotonic()
    stopping = threading.Thread(target=worker.unsubscribe, daemon=True)
    stopping.start()
    stopping.join(2 * PROMPT)
    connection.close()
    return time.monotonic() - started


@pytest.mark.parametrize("name", sorted(WORKER_CLASSES))
def test_the_worker_stops_listening_at_once(name: str, redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    assert unsubscribe_time(WORKER_CLASSES[name], redis_url, monkeypatch) < PROMPT


def test_rqs_own_worker_waits_out_its_listener(redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the classes above fix (if RQ fixes it, they can go)."""
    assert unsubscribe_time(SimpleWorker, redis_url, monkeypatch) >= 2 * PROMPT


@pytest.mark.parametrize("name", sorted(WORKER_CLASSES))
def test_a_sigterm_to_every_process_lets_the_running_job_finish(name: str, postgres_url: str, redis_url: str,
                                                                tmp_path: Path) -> None:
    """What a platform does on a restart (Heroku signals every process of the dyno; systemd the whole cgroup):
    SIGTERM to the worker, its scheduler and a fork worker's work horse. The tool finishes, the turn completes
    in that run, and the worker exits."""
    truncate_all(postgres_url)
    queue = f"term-{uuid.uuid4().hex[:12]}"
    stack = Stack("postgres", Settings(database_url=postgres_url, redis_url=redis_url, queue=queue,
                                       agent=TEST_AGENT, api_keys=API_KEYS))
    worker = WorkerProcess(worker_env(postgres_url, redis_url, queue, HITL_WORKER_CLASS=name),
                           tmp_path / "worker.log")
    try:
        opened = open_session(stack.rt, api_key_principal("alice"),
                              message=script([("slow_sync", {"seconds": 2})], final="ok"))
        wait_for(started("slow_sync"), what="the tool to start")
        worker.kill(15)
        assert worker.proc.returncode == 0, worker.tail()
        [turn] = stack.history(opened.session_id)["turns"]
        assert turn["status"] == "completed", worker.tail()
        assert [run["status"] for run in turn["runs"]] == ["succeeded"]
        assert [e["phase"] for e in read_ledger() if e["tool"] == "slow_sync"] == ["start", "end"]
    finally:
        worker.kill(9) if worker.proc.poll() is None else None
        stack.close()


def test_rq_jobs_get_the_job_timeout_of_the_settings(redis_url: str, tmp_path: Path) -> None:
    """HITL_JOB_TIMEOUT reaches every job the web processes push (RQ's 180 s otherwise)."""
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'timeout.db'}", redis_url=redis_url,
                        queue=f"test-timeout-{uuid.uuid4().hex[:8]}", job_timeout=900, agent=TEST_AGENT)
    rt = build_runtime(settings)
    rq = rt.executor
    assert isinstance(rq, RQExecutor)
    try:
        rq.submit(rt, "sweep", [], "long", 1)
        [job] = rq.queue.get_jobs()
        assert job.timeout == 900
        assert RQExecutor(redis_url).job_timeout == 180
    finally:
        rq.queue.empty()
