"""The transactional outbox: a job's row leaves with the job; a lost push is pushed again, not too often."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete, select, update

from engine import defaults
from engine.channels.contract import Answers, Message
from engine.channels.inbound import accept
from engine.jobs.executors import InlineExecutor, RQExecutor
from engine.jobs.outbox import push_outbox
from engine.jobs.perform import IMPLEMENTATIONS, perform
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, api_key_principal
from engine.store.db import Database
from engine.store.events import emit
from engine.store.tables import Inbound, InputRequest, Outbox, Session, Turn
from engine.turns.sessions import open_session
from tests.conftest import Stack
from tests.support.agent import agent as test_agent
from tests.support.agent import read_ledger, script
from tests.support.fake_channel import RecordingChannel


class Dropped:
    """An executor whose queue loses every job it is given (Redis flushed right after the push)."""

    def __init__(self) -> None:
        self.pushed: list[tuple[str, list[Any]]] = []
        self.rows: list[tuple[int, str, list[Any]]] = []
        """What was pushed, with each job's outbox row: to run the job by hand."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        self.pushed.append((job, args))
        self.rows.append((outbox_id, job, args))

    def run(self, rt: Runtime, job: str) -> None:
        """Run the last pushed `job` here, as a worker would."""
        outbox_id, _, args = next(row for row in reversed(self.rows) if row[1] == job)
        perform(rt, job, outbox_id, args)

    def waiting_since(self) -> datetime | None:
        return None  # it cannot tell: the outbox sweep pushes after its interval


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """A migrated SQLite database of the test's own."""
    database = Database(f"sqlite:///{tmp_path / 'outbox.db'}")
    database.upgrade()
    yield database
    database.dispose()


def clocked(db: Database, executor: Dropped) -> tuple[Runtime, dict[str, datetime]]:
    """A runtime whose clock stands still at `clock["now"]` until the test moves it."""
    clock = {"now": Runtime(db, test_agent, executor).now()}
    return Runtime(db, test_agent, executor, clock=lambda: clock["now"]), clock


def outbox_rows(rt: Runtime) -> list[tuple[str, list[Any]]]:
    with rt.db.read() as db:
        return [(row.job, list(row.args)) for row in db.execute(select(Outbox)).scalars()]


def test_a_jobs_outbox_row_leaves_with_the_job(stack: Stack) -> None:
    sid, _ = stack.start(script([("lookup", {"order_id": "o-1"})], final="looked"))

    assert stack.turn(sid)["status"] == "completed"
    assert outbox_rows(stack.rt) == []


def test_a_lost_push_is_pushed_again_once_per_interval(db: Database) -> None:
    dropped = Dropped()
    rt, clock = clocked(db, dropped)
    now = clock["now"]
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


class Behind(Dropped):
    """A queue that is behind: the oldest job still waiting in it was pushed at `head`."""

    def __init__(self) -> None:
        super().__init__()
        self.head: datetime | None = None

    def waiting_since(self) -> datetime | None:
        return self.head


def test_a_queue_that_is_behind_is_not_fed_duplicates(db: Database) -> None:
    behind = Behind()
    rt, clock = clocked(db, behind)
    now = clock["now"]
    open_session(rt, None, message=script([("lookup", {"order_id": "o-3"})], final="late"))
    clock["now"] = now + 3 * timedelta(seconds=defaults.SWEEP_OUTBOX_AFTER_SECONDS)
    behind.head = now - timedelta(seconds=1)  # a job pushed before ours has not started: ours waits behind it
    assert push_outbox(rt) == 0
    behind.head = now + timedelta(seconds=1)  # the queue has moved past ours, which is still here: lost
    assert push_outbox(rt) == 1
    assert len(behind.pushed) == 2


def aged(rt: Runtime, minutes: int = 5) -> None:
    """Everything queued and pushed `minutes` ago."""
    long_ago = rt.now() - timedelta(minutes=minutes)
    with rt.db.write() as db:
        db.execute(update(Outbox).values(available_at=long_ago))
        db.execute(update(Turn).values(updated_at=long_ago))
        db.execute(update(Inbound).values(received_at=long_ago))


def test_sweep_makes_a_job_again_only_for_work_whose_job_left_the_outbox(db: Database) -> None:
    """A queued turn, a channel delivery or an inbound item whose job is still in the outbox is pushed again
    from its row (once), not given a second job; one whose job started and died gets a new job."""
    dropped = Dropped()
    rt = Runtime(db, test_agent, dropped, channels={"fake": RecordingChannel()})
    opened = open_session(rt, None, message="hi", channel="fake", address="fake:room:1")
    with rt.transaction() as session:  # an event to deliver there
        emit(session, opened.session_id, "assistant.message", {"text": "hello"}, turn_id=None, at=rt.now())
    accept(rt, "fake", "evt-1", None, b"{}", Message("fake:room:1", "again"))
    aged(rt)
    queued = sorted(outbox_rows(rt))
    assert [job for job, _ in queued] == ["deliver", "process_inbound", "run_turn"]

    report = sweep(rt)

    assert (report.requeued, report.redelivered, report.pushed) == (0, 0, 3)
    assert sorted(outbox_rows(rt)) == queued

    with db.write() as session:  # the three jobs started (each took its row) and died
        session.execute(delete(Outbox))
        session.execute(update(Session).values(delivery_queued=False))
    aged(rt)
    report = sweep(rt)

    assert (report.requeued, report.redelivered) == (1, 2)
    assert sorted(outbox_rows(rt)) == queued
    assert opened.turn_id in {args[0] for job, args in queued if job == "run_turn"}


def test_each_executor_tells_when_its_oldest_waiting_job_was_pushed(redis_url: str, db: Database) -> None:
    """RQ: the head of the queue's `enqueued_at`; in process: the oldest job not started. None when none waits."""
    rq = RQExecutor(redis_url, f"test-head-{uuid.uuid4().hex[:8]}")
    inline = InlineExecutor(1)
    gate = threading.Event()
    try:
        assert rq.waiting_since() is None
        rt = Runtime(db, test_agent, rq)
        before = rt.now()
        rq.submit(rt, "sweep", [], "first", 1)
        rq.submit(rt, "sweep", [], "second", 2)
        head = rq.waiting_since()
        assert head is not None and before <= head <= rt.now()
        rq.queue.remove("first")
        later = rq.waiting_since()
        assert later is not None and later >= head
        rq.queue.empty()
        assert rq.waiting_since() is None

        assert inline.waiting_since() is None
        inline._pool.submit(gate.wait, 10)  # the only thread is busy: jobs wait
        rt = Runtime(db, test_agent, inline)
        before = rt.now()
        inline.submit(rt, "sweep", [], "waits", 1)
        waiting = inline.waiting_since()
        assert waiting is not None and before <= waiting <= rt.now()
        gate.set()
        assert inline.join()
        assert inline.waiting_since() is None
    finally:
        gate.set()
        inline.shutdown()
        rq.queue.delete(delete_jobs=True)


def clicked(db: Database, *charges: str) -> tuple[Runtime, Dropped, list[str]]:
    """One turn per charge, parked on its refund approval, and a stored click approving them all (its
    process_inbound job pushed, not run); the executor's record of pushes starts empty."""
    dropped, alice = Dropped(), api_key_principal("alice")
    rt = Runtime(db, test_agent, dropped)
    turns = [open_session(rt, alice, message=script([("refund", {"charge_id": c, "amount": 5})])).turn_id
             for c in charges]
    for outbox_id, job, args in list(dropped.rows):
        perform(rt, job, outbox_id, args)
    answers = [InputResponse(request_id=r, option_id="approve") for r in pending_request_ids(rt)]
    accept(rt, "fake", f"click-{'-'.join(charges)}", alice, b"{}", Answers(tuple(answers)))
    dropped.pushed.clear()
    return rt, dropped, turns


def test_the_job_that_applies_an_answer_resumes_the_turn_itself(db: Database) -> None:
    """No trip through the queue: when process_inbound returns, the turn has run to its end."""
    rt, dropped, [turn_id] = clicked(db, "ch_1")

    dropped.run(rt, "process_inbound")

    with db.read() as session:
        assert session.get_one(Turn, turn_id).status == "completed"
    assert [e["charge_id"] for e in read_ledger() if e["tool"] == "refund"] == ["ch_1"]
    assert dropped.pushed == []  # the resumed turn was not pushed to the queue
    assert outbox_rows(rt) == []  # and its job's row left when it started


def test_a_job_that_fails_after_resuming_a_turn_pushes_the_turn_to_the_queue(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With a response policy of its own, the click is settled first and its item marked processed after,
    in a transaction of its own: a failure there comes after the answer committed."""
    monkeypatch.setattr(test_agent, "response_policy", lambda _ctx: {"status": "allowed"})
    rt, dropped, [turn_id] = clicked(db, "ch_2")

    def broken(*_: Any) -> bool:
        raise RuntimeError("the database went away after the answer committed")

    monkeypatch.setattr("engine.channels.inbound.mark_processed", broken)
    with pytest.raises(RuntimeError):
        dropped.run(rt, "process_inbound")

    assert dropped.pushed == [("run_turn", [turn_id])]  # pushed, not lost with the failed job
    assert ("run_turn", [turn_id]) in outbox_rows(rt)
    assert read_ledger() == []


def test_a_click_the_default_policy_settles_commits_with_its_item_marked_processed(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One transaction stores, settles and marks: when marking fails, nothing of the answer is left, and
    the retried job applies it once."""
    rt, dropped, [turn_id] = clicked(db, "ch_3")
    with monkeypatch.context() as patched:
        def broken(*_: Any) -> bool:
            raise RuntimeError("the database went away before the answer committed")

        patched.setattr("engine.channels.inbound.mark_processed", broken)
        with pytest.raises(RuntimeError):
            dropped.run(rt, "process_inbound")
    assert len(pending_request_ids(rt)) == 1 and dropped.pushed == []

    dropped.run(rt, "process_inbound")
    dropped.run(rt, "process_inbound")  # delivered twice: the second run finds the item processed

    with db.read() as session:
        assert session.get_one(Turn, turn_id).status == "completed"
        assert session.execute(select(Inbound.processed_at)).scalar_one() is not None
    assert [e["charge_id"] for e in read_ledger() if e["tool"] == "refund"] == ["ch_3"]


def pending_request_ids(rt: Runtime) -> list[str]:
    with rt.db.read() as db:
        return list(db.execute(select(InputRequest.request_id).where(InputRequest.status == "pending")).scalars())


def test_a_job_runs_one_turn_it_resumed_and_pushes_the_others_and_one_that_fails(
    db: Database, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """One click answering two turns' requests: the second turn goes to the queue at once (each turn keeps the
    whole job timeout, and another worker may take it); the first runs here, and when its run breaks it is
    handed to the queue too, where RQ retries it."""
    rt, dropped, turns = clicked(db, "ch_3", "ch_4")
    ran: list[str] = []

    def breaks(rt: Runtime, turn_id: str) -> None:
        ran.append(turn_id)
        raise RuntimeError("the worker's database connection broke")

    monkeypatch.setitem(IMPLEMENTATIONS, "run_turn", breaks)
    dropped.run(rt, "process_inbound")

    [first] = ran
    [second] = [t for t in turns if t != first]
    assert dropped.pushed == [("run_turn", [second]), ("run_turn", [first])]
    with db.read() as session:
        assert {session.get_one(Turn, t).status for t in turns} == {"queued"}  # both wait for a worker
