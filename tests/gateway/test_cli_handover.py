"""`hitl answer` and `hitl resume` never run a turn: they hand it to the deployment (the RQ queue with REDIS_URL,
else the serving process), whose processes run it with the session's agent; where none takes it, they say so."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import requests
from redis import Redis
from rq import Queue
from sqlalchemy import select, update

from engine import defaults
from engine.jobs.runtime import Runtime
from engine.store.db import Database
from engine.store.tables import Outbox, Session
from engine.turns.sessions import open_session
from tests.conftest import ROOT, Stack, sqlite_settings
from tests.support.agent import agent as test_agent
from tests.support.agent import read_ledger, script
from tests.support.cli import migrated

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """`HITL_AGENT=myagent:agent hitl serve` on a free port, in a project directory holding myagent.py."""
    (tmp_path / "myagent.py").write_text("from tests.support.agent import agent\n")
    env = {name: value for name, value in os.environ.items() if name not in ("HITL_API_KEYS", "HITL_AGENT")}
    env.update({"PYTHONPATH": str(ROOT), "DATABASE_URL": "sqlite:///hitl.db", "REDIS_URL": ""})
    server = subprocess.Popen([sys.executable, "-m", "gateway", "serve", "--port", "0"], cwd=tmp_path,
                              env={**env, "HITL_AGENT": "myagent:agent"}, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout is not None
        yield server.stdout.readline().split()[2]
    finally:
        server.terminate()
        server.wait(10)


def test_answer_from_a_shell_without_hitl_agent_resumes_the_turn_in_the_server_with_the_session_agent(
        served: str, tmp_path: Path) -> None:
    """The CLI used to run the resumed turn itself, with the demo agent (its default): `KeyError: 'refund'`, a
    failed turn, and exit code 0."""
    opened = requests.post(f"{served}/api/sessions", json={"message": REFUND}, timeout=10).json()
    session = wait_for(lambda: requests.get(f"{served}/api/sessions/{opened['id']}", timeout=10).json(),
                       lambda history: history["turns"][0]["requests"])
    assert session["agent"] == "myagent:agent"  # where the agent comes from
    request_id = session["turns"][0]["requests"][0]["requestId"]
    env = {name: value for name, value in os.environ.items() if name not in ("HITL_AGENT", "REDIS_URL")}

    done = subprocess.run([sys.executable, "-m", "gateway", "answer", request_id, "approve", "--as", "alice"],
                          cwd=tmp_path, env={**env, "PYTHONPATH": str(ROOT), "DATABASE_URL": "sqlite:///hitl.db"},
                          capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert done.stdout == f"approved {request_id} as alice; turn {opened['turnId']} resumes\n"
    turn = wait_for(lambda: requests.get(f"{served}/api/sessions/{opened['id']}", timeout=10).json()["turns"][0],
                    lambda turn: turn["status"] not in ("queued", "running"))
    assert turn["status"] == "completed", turn["error"]
    [refund] = [e for e in read_ledger() if e["tool"] == "refund"]
    assert refund["responder"] == "alice"


def wait_for(read: Any, done: Any, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not done(value := read()):
        assert time.monotonic() < deadline, value
        time.sleep(0.05)
    return value


@pytest.fixture
def parked(env: Path, tmp_path: Path) -> tuple[str, str, str]:
    """A refund waiting for approval in the CLI's database (session, turn, request), and no process serving it."""
    server = Stack("sqlite", sqlite_settings(tmp_path))
    try:
        sid, turn_id = server.start(REFUND)
        [request] = server.pending(sid)
    finally:
        server.close()
    return sid, turn_id, request["requestId"]


def outbox(stack: Stack) -> list[tuple[str, list[Any]]]:
    with stack.rt.db.read() as db:
        return [(row.job, row.args) for row in db.execute(select(Outbox)).scalars()]


def test_with_no_serving_process_the_answer_stands_and_the_command_says_so_and_exits_1(
        hitl: Any, parked: tuple[str, str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sid, turn_id, request_id = parked
    monkeypatch.setattr(defaults, "HAND_OVER_WAIT_SECONDS", 0.2)

    done = hitl("answer", request_id, "approve", "--as", "ops")

    assert done.code == 1 and done.out == ""
    assert done.message == (f"hitl: approved {request_id} as ops, but no `hitl serve` took turn {turn_id} within "
                            "0.2 s: what was done stands, and the turn resumes once `hitl serve` or `hitl worker` "
                            "runs on this database")
    assert read_ledger() == []

    monkeypatch.setattr(defaults, "HAND_OVER_POLL_SECONDS", 0.05)
    server = Stack("sqlite", sqlite_settings(tmp_path))  # `hitl serve` again
    try:
        wait_for(lambda: outbox(server), lambda rows: rows == [])  # it took the turn
        server.wait_idle()
        assert server.turn(sid)["status"] == "completed"
    finally:
        server.close()
    assert [e["responder"] for e in read_ledger() if e["tool"] == "refund"] == ["ops"]


class Dropped:
    """An executor that loses every job (a process that died after its commit)."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        pass

    def waiting_since(self) -> datetime | None:
        return None


def test_resume_with_no_serving_process_says_so_and_exits_1(hitl: Any, env: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    migrated(env)
    db = Database(os.environ["DATABASE_URL"])
    try:
        opened = open_session(Runtime(db, test_agent, Dropped()), None, message=REFUND)
    finally:
        db.dispose()
    monkeypatch.setattr(defaults, "HAND_OVER_WAIT_SECONDS", 0.2)

    done = hitl("resume", str(opened.turn_id))

    assert done.code == 1 and done.out == ""
    assert done.message == (f"hitl: turn {opened.turn_id} requeued, but no `hitl serve` took turn {opened.turn_id} "
                            "within 0.2 s: what was done stands, and the turn resumes once `hitl serve` or `hitl "
                            "worker` runs on this database")
    assert read_ledger() == []


def test_with_redis_url_the_answer_hands_the_turn_to_the_queue(hitl: Any, parked: tuple[str, str, str],
                                                               redis_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _, turn_id, request_id = parked
    name = f"test-hand-over-{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("REDIS_URL", redis_url)
    monkeypatch.setenv("HITL_QUEUE", name)

    done = hitl("answer", request_id, "approve", "--as", "ops")

    assert (done.code, done.out) == (0, f"approved {request_id} as ops; turn {turn_id} resumes\n")
    with Redis.from_url(redis_url) as connection:
        queue = Queue(name, connection=connection)
        try:
            [job] = queue.get_jobs()
            expected = ("engine.jobs.perform.run", "run_turn", (turn_id,))
            assert (job.func_name, job.args[0], job.args[2:]) == expected
        finally:
            queue.delete()
    assert read_ledger() == []  # a worker runs it


def test_with_redis_out_of_reach_the_answer_stands_and_the_command_says_so(hitl: Any, parked: tuple[str, str, str],
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _, turn_id, request_id = parked
    monkeypatch.setenv("REDIS_URL", "redis://127.0.0.1:1/0")  # nothing listens on port 1

    done = hitl("answer", request_id, "approve", "--as", "ops")

    assert done.code == 1
    assert done.message.startswith(f"hitl: approved {request_id} as ops, but REDIS_URL's queue cannot take turn "
                                   f"{turn_id} (")
    assert "Connection refused" in done.message
    assert done.message.endswith("): what was done stands, and the turn resumes once `hitl serve` or `hitl worker` "
                                 "runs on this database")
    db = Database(os.environ["DATABASE_URL"])
    try:
        with db.read() as session:  # due before any other row: the next sweep of a worker pushes it
            assert session.execute(select(Outbox.job, Outbox.available_at)).all() == [
                ("run_turn", defaults.HANDED_OVER_AT)]
    finally:
        db.dispose()


def test_an_answer_is_judged_with_the_session_agent_or_not_at_all(hitl: Any, parked: tuple[str, str, str]) -> None:
    """The session's agent holds the response policies its answers go through: a command that cannot load it
    changes nothing (with HITL_AGENT's agent it would judge with policies that are not the session's)."""
    _, _, request_id = parked
    db = Database(os.environ["DATABASE_URL"])
    try:
        with db.write() as session:
            session.execute(update(Session).values(agent="elsewhere_agents:agent"))
    finally:
        db.dispose()

    done = hitl("answer", request_id, "approve", "--as", "ops")

    assert done.code == 1
    assert done.message == (f"hitl: the session of request {request_id} runs agent elsewhere_agents:agent: No module "
                            "named 'elsewhere_agents'; answer where the gateway runs (its directory, its "
                            "PYTHONPATH), or from the console")
    assert hitl("requests", "--status", "pending", "--json").json()["requests"][0]["requestId"] == request_id
