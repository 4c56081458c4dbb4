"""`hitl worker` stops promptly: RQ's command listener must not hold a warm shutdown for its one-minute wait;
and a worker killed outright takes its scheduler process with it."""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from redis import Redis
from redis.client import Pipeline, PubSub
from rq import Queue, SimpleWorker
from rq.exceptions import SchedulerNotFound
from rq.scheduler import RQScheduler
from rq.worker import BaseWorker

from engine.jobs.executors import RQExecutor
from engine.protocol import api_key_principal
from engine.turns.sessions import open_session
from gateway.compose import build_runtime
from gateway.rqworker import HEARTBEAT_SLACK_SECONDS, WORKER_CLASSES
from gateway.settings import Settings
from tests.conftest import API_KEYS, TEST_AGENT, Stack, WorkerProcess, children, truncate_all, worker_env
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


def scheduler_holding(connection: Redis, queue: str) -> RQScheduler | None:
    """The scheduler that holds the queue's scheduler lock (its name and process id), if any."""
    name = connection.get(RQScheduler.get_locking_key(queue))
    if name is None:
        return None
    with contextlib.suppress(SchedulerNotFound):
        return RQScheduler.fetch(name.decode(), connection)
    return None


def running(pid: int) -> bool:
    """Whether process `pid` exists and has not exited (a zombie waiting to be reaped has)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False



def lock_taken(connection: Redis, queue: str, other_than: str | None = None) -> RQScheduler:
    """Wait until a scheduler (not named `other_than`) holds the queue's scheduler lock; that scheduler."""
    found: list[RQScheduler] = []

    def taken() -> bool:
        held = scheduler_holding(connection, queue)
        if held is not None and held.name != other_than:
            found.append(held)
        return bool(found)

    wait_for(taken, timeout=30, what="a scheduler to take the lock")
    return found[0]


def test_a_sigkilled_worker_leaves_no_scheduler_behind(postgres_url: str, redis_url: str, tmp_path: Path) -> None:
    """The OOM killer, or `kill -9` of the worker alone: its scheduler process (RQ forks one, for retries with a
    delay) ends within seconds and gives up the queue's scheduler lock, which the next worker then takes."""
    queue = f"orphan-{uuid.uuid4().hex[:12]}"
    env = worker_env(postgres_url, redis_url, queue)
    connection = Redis.from_url(redis_url)
    first = WorkerProcess(env, tmp_path / "first.log")
    second, orphan = None, None
    try:
        orphan = lock_taken(connection, queue)
        assert orphan.pid in children(first.proc.pid), first.tail()

        os.kill(first.proc.pid, signal.SIGKILL)
        first.proc.wait(10)
        wait_for(lambda: not running(orphan.pid), timeout=5, what="the scheduler process to end")

        second = WorkerProcess(env, tmp_path / "second.log")
        successor = lock_taken(connection, queue, other_than=orphan.name)
        assert successor.pid in children(second.proc.pid), second.tail()
    finally:
        if second is not None:
            second.kill(15)
        if orphan is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(orphan.pid, signal.SIGKILL)  # without the fix it would run, holding the lock, for good
        first.log.close()
        connection.close()


def round_trips_per_job(worker_class: type[BaseWorker], redis_url: str, monkeypatch: pytest.MonkeyPatch,
                        jobs: int = 20) -> tuple[float, int]:
    """The round trips to Redis a worker of `worker_class` makes per job (a command on its own, or a pipeline),
    over a burst of `jobs` no-op jobs; and the least time to live its registration had when a job started."""
    connection = Redis.from_url(redis_url)
    queue = Queue(f"test-{uuid.uuid4().hex[:12]}", connection=connection)
    for _ in range(jobs):
        queue.enqueue("os.getpid")
    made = [0]
    commands, pipelines = Redis.execute_command, Pipeline.execute

    def command(self: Redis, *args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        return commands(self, *args, **kwargs)

    def pipeline(self: Pipeline, *args: Any, **kwargs: Any) -> Any:
        made[0] += 1
        return pipelines(self, *args, **kwargs)

    ttls: list[int] = []
    execute = worker_class.execute_job

    def execute_job(self: BaseWorker, *args: Any, **kwargs: Any) -> Any:
        ttls.append(commands(connection, "TTL", self.key))  # (not counted)
        return execute(self, *args, **kwargs)

    worker = worker_class([queue], connection=connection)
    with monkeypatch.context() as patched:
        patched.setattr(Redis, "execute_command", command)
        patched.setattr(Pipeline, "execute", pipeline)
        patched.setattr(worker_class, "execute_job", execute_job)
        worker.work(burst=True)
    assert queue.finished_job_registry.count == jobs == len(ttls)
    queue.delete(delete_jobs=True)
    return made[0] / jobs, min(ttls)


class StockBeats(WORKER_CLASSES["simple"]):  # type: ignore[misc,valid-type]
    """Ours with RQ's own heartbeat and state (and our prompt shutdown: RQ's waits out its listener)."""

    heartbeat = BaseWorker.heartbeat
    set_state = BaseWorker.set_state


def test_the_simple_worker_sends_no_heartbeat_or_state_redis_has(redis_url: str,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """RQ's worker renews its registration three times a job and says `idle` twice; ours does each once, and its
    registration never has less time to live than RQ's would."""
    ours, ours_ttl = round_trips_per_job(WORKER_CLASSES["simple"], redis_url, monkeypatch)
    theirs, their_ttl = round_trips_per_job(StockBeats, redis_url, monkeypatch)

    assert ours <= theirs - 5, (ours, theirs)  # (about 15 against 22)
    assert ours_ttl >= their_ttl - HEARTBEAT_SLACK_SECONDS - 2  # (2: a slow machine)
