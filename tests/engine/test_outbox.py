"""The transactional outbox: a job's row leaves with the job; a lost push is pushed again, not too often."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from engine import defaults
from engine.db import Database
from engine.executors import InlineExecutor
from engine.recovery import push_outbox
from engine.runtime import Runtime
from engine.sessions import open_session
from engine.tables import Outbox, Turn
from tests.conftest import Stack
from tests.support.agent import agent as test_agent
from tests.support.agent import read_ledger, script


class Dropped:
    """An executor whose queue loses every job it is given (Redis flushed right after the push)."""

    def __init__(self) -> None:
        self.pushed: list[tuple[str, list[Any]]] = []

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        self.pushed.append((job, args))


def outbox_rows(rt: Runtime) -> list[tuple[str, list[Any]]]:
    with rt.db.read() as db:
        return [(row.job, list(row.args)) for row in db.execute(select(Outbox)).scalars()]


def test_a_jobs_outbox_row_leaves_with_the_job(stack: Stack) -> None:
    sid, _ = stack.start(script([("lookup", {"order_id": "o-1"})], final="looked"))

    assert stack.turn(sid)["status"] == "completed"
    assert outbox_rows(stack.rt) == []


def test_a_lost_push_is_pushed_again_once_per_interval(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'outbox.db'}")
    db.upgrade()
    dropped = Dropped()
    now = Runtime(db, test_agent, dropped).now()
    clock = {"now": now}
    rt = Runtime(db, test_agent, dropped, clock=lambda: clock["now"])
    try:
        opened = open_session(rt, None, message=script([("lookup", {"order_id": "o-2"})], final="late"))
        assert dropped.pushed == [("run_turn", [opened.turn_id])]
        assert outbox_rows(rt) == [("run_turn", [opened.turn_id])]  # the job never started

        interval = timedelta(seconds=defaults.SWEEP_OUTBOX_AFTER_SECONDS)
        assert push_outbox(rt) == 0  # just pushed: its job may still be in the queue
        clock["now"] = now + interval
        assert push_outbox(rt) == 1
        assert push_outbox(rt) == 0  # pushed again: another interval before the next try
        clock["now"] = now + 2 * interval
        assert push_outbox(rt) == 1
        assert dropped.pushed == [("run_turn", [opened.turn_id])] * 3

        inline = InlineExecutor(1)
        rt.executor = inline
        clock["now"] = now + 3 * interval
        assert push_outbox(rt) == 1
        assert inline.join()
        inline.shutdown()
        assert outbox_rows(rt) == []  # the job ran: its row is gone, nothing is pushed again
        with db.read() as session:
            assert session.get_one(Turn, opened.turn_id).status == "completed"
        assert [e["order_id"] for e in read_ledger() if e["tool"] == "lookup"] == ["o-2"]
    finally:
        db.dispose()
