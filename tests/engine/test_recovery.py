"""A crashed worker loses nothing; a restart loses nothing; Redis down loses nothing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from engine.jobs.recovery import sweep
from engine.store.tables import ToolCall
from gateway.settings import Settings
from tests.conftest import (
    API_KEYS,
    ROOT,
    TEST_AGENT,
    Stack,
    WorkerProcess,
    sqlite_settings,
    truncate_all,
    worker_env,
)
from tests.support.agent import read_ledger, script, started, wait_for
from tests.support.services import RedisServer

LEASE = 3


@dataclass
class Crashable:
    """A stack whose runner can be SIGKILLed mid-tool: `doom(...)` starts the work, `kill()` kills it."""

    stack: Stack
    doom: Callable[[str, str], Callable[[], None]]
    revive: Callable[[], None]


@pytest.fixture(params=["sqlite", "postgres"])
def crashable(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Crashable]:
    procs: list[WorkerProcess] = []
    if request.param == "sqlite":
        settings = sqlite_settings(tmp_path, lease_seconds=LEASE)
        stack = Stack("sqlite", settings)
        env = dict(os.environ, DATABASE_URL=settings.database_url, HITL_AGENT=TEST_AGENT,
                   HITL_LEASE_SECONDS=str(LEASE), PYTHONPATH=str(ROOT))
        env.pop("REDIS_URL", None)

        def doom(command: str, argument: str) -> Callable[[], None]:
            proc = subprocess.Popen([sys.executable, "-m", "tests.support.doomed", command, argument], cwd=ROOT,
                                    env=env, start_new_session=True)
            return lambda: (os.killpg(proc.pid, 9), proc.wait(10))  # type: ignore[func-returns-value]

        def revive() -> None:
            return None

    else:
        url, redis_url = request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_url")
        truncate_all(url)
        queue = f"crash-{os.getpid()}-{time.monotonic_ns()}"
        stack = Stack("postgres", Settings(database_url=url, redis_url=redis_url, queue=queue, agent=TEST_AGENT,
                                           lease_seconds=LEASE, api_keys=API_KEYS))
        env = worker_env(url, redis_url, queue, HITL_LEASE_SECONDS=str(LEASE))  # its sweep recovers too

        def spawn() -> WorkerProcess:
            procs.append(WorkerProcess(env, tmp_path / f"worker{len(procs)}.log"))
            return procs[-1]

        spawn()

        def doom(command: str, argument: str) -> Callable[[], None]:
            worker = procs[-1]
            if command == "start":
                from engine.protocol import api_key_principal
                from engine.turns.sessions import open_session

                open_session(stack.rt, api_key_principal("alice"), message=argument)
            else:
                stack.answer(argument, "approve", wait=False)
            return lambda: worker.kill(9)

        def revive() -> None:
            spawn()

    yield Crashable(stack, doom, revive)
    for proc in procs:
        proc.kill(15) if proc.proc.poll() is None else None
    stack.close()


def only_session(stack: Stack) -> str:
    from engine.store.queries import list_sessions

    [session] = list_sessions(stack.rt)["sessions"]
    return str(session["id"])


def crash_while(crashable: Crashable, tool: str, command: str, argument: str) -> None:
    """Start work in a process, SIGKILL it while `tool` runs, then recover as a worker's sweep would."""
    kill = crashable.doom(command, argument)
    wait_for(started(tool), what="the tool to start")
    kill()
    crashable.revive()
    wait_for(lambda: recovered(crashable.stack), timeout=LEASE + 30, what="the lease to run out")
    crashable.stack.wait_idle()


def recovered(stack: Stack) -> bool:
    """Sweep (as every worker does every few seconds); True once a dead runner's turn was recovered."""
    sweep(stack.rt)
    from engine.store.queries import list_sessions

    return any(r["status"] == "crashed" for s in list_sessions(stack.rt)["sessions"]
               for t in stack.history(s["id"])["turns"] for r in t["runs"])


def test_a_gated_tool_interrupted_by_a_crash_needs_a_fresh_approval(crashable: Crashable) -> None:
    stack = crashable.stack
    sid, _ = stack.start(script([("slow_refund", {"seconds": 60})]))
    [request] = stack.pending(sid)

    crash_while(crashable, "slow_refund", "answer", request["requestId"])

    turn = stack.turn(sid)
    assert turn["status"] == "waiting"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "crashed", "interrupted"]
    [fresh] = stack.pending(sid)
    assert fresh["requestId"] != request["requestId"]
    assert "may have partly run" in fresh["prompt"]
    assert len([e for e in read_ledger() if e["tool"] == "slow_refund"]) == 1  # not re-run without a person

    stack.answer(fresh["requestId"], "approve")

    starts = [e for e in read_ledger() if e["tool"] == "slow_refund" and e["phase"] == "start"]
    assert [s["again"] for s in starts] == [False, True]
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "crashed", "interrupted", "succeeded"]


def test_an_idempotent_tool_runs_again_with_the_same_key(crashable: Crashable) -> None:
    stack = crashable.stack
    crash_while(crashable, "slow_sync", "start", script([("slow_sync", {"seconds": 60})]))

    sid = only_session(stack)
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["crashed", "succeeded"]
    starts = [e for e in read_ledger() if e["tool"] == "slow_sync" and e["phase"] == "start"]
    assert len(starts) == 2 and starts[0]["idempotencyKey"] == starts[1]["idempotencyKey"]


def test_an_unsafe_tool_is_not_retried_after_a_crash(crashable: Crashable) -> None:
    stack = crashable.stack
    crash_while(crashable, "fragile", "start", script([("fragile", {"seconds": 60})]))

    turn = stack.turn(only_session(stack))
    assert turn["status"] == "completed"
    assert "TOOL_INTERRUPTED" in turn["result"]
    assert len([e for e in read_ledger() if e["tool"] == "fragile"]) == 1


def test_a_parked_turn_survives_a_restart_of_every_process(stack: Stack, tmp_path: Path,
                                                            request: pytest.FixtureRequest) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 4})]))
    [pending] = stack.pending(sid)
    settings = stack.settings
    stack.close()
    worker = None
    if stack.name == "postgres":
        # a worker on a queue of its own stands for "every process restarted"
        settings = settings.model_copy(update={"queue": f"restart-{time.monotonic_ns()}"})
        worker = WorkerProcess(worker_env(settings.database_url, str(settings.redis_url), settings.queue),
                               tmp_path / "restarted.log")
    try:
        reborn = Stack(stack.name, settings)
        assert reborn.answer(pending["requestId"], "approve").status == "settled"
        assert reborn.turn(sid)["status"] == "completed"
        assert len([e for e in read_ledger() if e["tool"] == "refund"]) == 1
        reborn.close()
    finally:
        if worker:
            worker.kill(15)


@pytest.mark.usefixtures("postgres_url")
def test_redis_down_when_the_answer_arrives(tmp_path: Path, postgres_url: str) -> None:
    truncate_all(postgres_url)
    redis = RedisServer(tmp_path).start()
    redis_url = redis.url
    queue = f"redisdown-{time.monotonic_ns()}"
    env = worker_env(postgres_url, redis_url, queue, HITL_SWEEP_SECONDS="3600")
    worker = WorkerProcess(env, tmp_path / "worker.log")
    stack = Stack("postgres", Settings(database_url=postgres_url, redis_url=redis_url, queue=queue,
                                       agent=TEST_AGENT, api_keys=API_KEYS))
    try:
        sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 8})]))
        [pending] = stack.pending(sid)
        worker.kill(15)
        redis.stop()

        result = stack.answer(pending["requestId"], "approve", wait=False)

        assert result.status == "settled"  # the answer is stored although Redis is down
        assert stack.turn(sid)["status"] == "queued"
        assert read_ledger() == []

        redis.start()
        worker = WorkerProcess(env, tmp_path / "worker2.log")
        real_clock = stack.rt.clock
        stack.rt.clock = lambda: real_clock() + timedelta(seconds=60)
        assert sweep(stack.rt).pushed >= 1
        stack.rt.clock = real_clock
        stack.wait_idle()

        assert stack.turn(sid)["status"] == "completed"
        assert len([e for e in read_ledger() if e["tool"] == "refund"]) == 1
    finally:
        worker.kill(15)
        redis.stop()
        stack.close()


def closed_but_waiting(stack: Stack) -> tuple[str, str]:
    """A turn parked on a refund approval that was closed by a process that died before resuming it (every
    close resumes its turn in the same transaction now: such a turn comes from an older version's crash)."""
    from engine.answers.settlement import close_request
    from engine.protocol import api_key_principal

    sid, turn_id = stack.start(script([("refund", {"charge_id": "ch_9", "amount": 9})]))
    [request] = stack.pending(sid)
    with stack.rt.transaction() as db:
        close_request(stack.rt, db, request["requestId"], outcome="approved",
                      response={"optionId": "approve", "text": None}, responder=api_key_principal("alice"))
    assert stack.turn(sid)["status"] == "waiting"
    return sid, turn_id


def test_the_sweep_resumes_a_settled_turn_nobody_resumed(stack: Stack) -> None:
    sid, _ = closed_but_waiting(stack)

    assert sweep(stack.rt, settled=False).resumed == 0  # the cheap sweep does not read every waiting turn
    assert stack.turn(sid)["status"] == "waiting"
    assert sweep(stack.rt).resumed == 1
    stack.wait_idle()

    assert stack.turn(sid)["status"] == "completed"
    assert [e["charge_id"] for e in read_ledger() if e["tool"] == "refund"] == ["ch_9"]


def test_a_sweeper_looks_for_settled_turns_first_then_only_every_settled_every(tmp_path: Path) -> None:
    from engine.jobs.recovery import Sweeper

    stack = Stack("sqlite", sqlite_settings(tmp_path))
    sweeper = Sweeper(stack.rt, 0.05, settled_every=3600)
    try:
        first, _ = closed_but_waiting(stack)
        sweeper.start()
        wait_for(lambda: stack.turn(first)["status"] == "completed", timeout=30, what="the first sweep")

        later, _ = closed_but_waiting(stack)
        time.sleep(0.5)  # ten sweeps, none of them due to look again

        assert stack.turn(later)["status"] == "waiting"
        assert sweep(stack.rt).resumed == 1
    finally:
        sweeper.stop()
        stack.close()


def test_the_fresh_approval_after_a_crash_expires_as_the_tools_approvals_do(stack: Stack) -> None:
    """refund's approvals expire after 600 s; so does the one asked again for a call a dead worker ran."""
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 4})]))
    [request] = stack.pending(sid)
    assert request["expiresAt"] is not None
    with stack.rt.following() as resumes:
        stack.answer(request["requestId"], "approve", wait=False)
    with stack.rt.transaction() as db:  # as recover_turn() leaves a call whose worker died while it ran
        db.execute(update(ToolCall).values(status="unknown", attempts=1, interrupted=1))
    stack.rt.push(resumes)
    stack.wait_idle()

    [fresh] = stack.pending(sid)
    assert "may have partly run" in fresh["prompt"]
    assert fresh["expiresAt"] is not None
    opened = datetime.fromisoformat(fresh["createdAt"])
    assert datetime.fromisoformat(fresh["expiresAt"]) - opened == timedelta(seconds=600)
