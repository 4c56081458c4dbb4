"""sweep(): what makes a crashed worker or a down Redis lose nothing."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session as DbSession

from . import defaults
from .delivery import stale_sessions
from .protocol import TIMEOUT_PRINCIPAL
from .responses import judge_again, unjudged_candidates
from .retention import prune
from .runtime import Runtime
from .settlement import close_request
from .storage import APPROVE
from .tables import UNPROCESSED, Inbound, InputRequest, Outbox, Run, ToolCall, Turn
from .timers import fire_timers
from .turns import blocking_turn, latest_run, lock_turn, schedule_resume

log = logging.getLogger(__name__)


@dataclass
class SweepReport:
    expired: int = 0
    reminded: int = 0
    escalated: int = 0
    rejudged: int = 0
    recovered: int = 0
    resumed: int = 0
    requeued: int = 0
    redelivered: int = 0
    pushed: int = 0
    pruned: int = 0


def sweep(rt: Runtime, *, settled: bool = True) -> SweepReport:
    """Judge candidates whose process died while their response policy ran, expire overdue requests, send the
    reminders and make the escalations that fell due, recover dead runners' turns, resume settled ones (with
    `settled`: a query over every waiting turn), re-enqueue lost jobs, push the outbox, and prune a batch of
    inbound rows past their retention."""
    report = SweepReport()
    now = rt.now()
    with rt.db.read() as db:
        expired = list(db.execute(
            select(Turn.id).where(Turn.status == "running", Turn.lease_until < now)
        ).scalars())
        open_requests = select(InputRequest.request_id).where(
            InputRequest.turn_id == Turn.id, InputRequest.status == "pending").exists()
        waiting = list(db.execute(  # settled but never resumed: one query, however many turns are parked
            select(Turn.id).where(Turn.status == "waiting", ~open_requests)).scalars()) if settled else []
        stuck = list(db.execute(
            select(Turn.id).where(
                Turn.status == "queued",
                Turn.updated_at < now - timedelta(seconds=defaults.SWEEP_QUEUED_TURN_AFTER_SECONDS),
            )
        ).scalars())
        queued = owed(db, "run_turn", stuck)  # their jobs wait in the outbox: push_outbox() sees to them
    stuck = [turn_id for turn_id in stuck if turn_id not in queued]
    report.rejudged = sum(judge_again(rt, candidate_id) for candidate_id in unjudged_candidates(rt))
    report.expired = expire_requests(rt)
    fired = fire_timers(rt)
    report.reminded, report.escalated = fired.reminded, fired.escalated
    for turn_id in expired:
        report.recovered += recover_turn(rt, turn_id)
    for turn_id in waiting:
        with rt.transaction() as db:
            report.resumed += schedule_resume(rt, db, lock_turn(db, turn_id))
    for turn_id in stuck:
        report.requeued += requeue(rt, turn_id)
    report.redelivered = redeliver(rt)
    report.pushed = push_outbox(rt)
    report.pruned = prune(rt)
    if report != SweepReport():
        log.info("sweep: %s", report)
    return report


def expire_requests(rt: Runtime) -> int:
    """Pending requests past `expiresAt` close as their `on_timeout` says: `expired` (the turn resumes as if denied
    or dismissed), or, where `approve` was set, approved by the app ("approved on timeout", never a person). A
    turn's overdue requests close in one transaction: a text channel delivering between two expiries would post
    the prompt of a request about to expire."""
    with rt.db.read() as db:
        overdue = db.execute(
            select(InputRequest.request_id, InputRequest.turn_id, InputRequest.on_timeout)
            .where(InputRequest.status == "pending", InputRequest.expires_at < rt.now()).order_by(InputRequest.seq)
        ).all()
    by_turn: dict[str, list[tuple[str, str | None]]] = {}
    for request_id, turn_id, on_timeout in overdue:
        by_turn.setdefault(turn_id, []).append((request_id, on_timeout))
    count = 0
    for turn_id, requests in by_turn.items():
        with rt.transaction() as db:
            turn = lock_turn(db, turn_id)
            closed = sum(time_out(rt, db, request_id, on_timeout) for request_id, on_timeout in requests)
            if closed:
                count += closed
                schedule_resume(rt, db, turn)
    return count


def time_out(rt: Runtime, db: DbSession, request_id: str, on_timeout: str | None) -> bool:
    """Close an overdue request as its `on_timeout` says; False when it closed meanwhile."""
    if on_timeout == "approve":
        closed = close_request(rt, db, request_id, outcome="approved", response={"optionId": APPROVE["id"],
                               "text": None}, responder=TIMEOUT_PRINCIPAL)
    else:
        closed = close_request(rt, db, request_id, outcome="expired", response=None, responder=None)
    return closed is not None


def recover_turn(rt: Runtime, turn_id: str) -> int:
    """A running turn whose lease ran out: its Run crashed, its running calls are `unknown`, Run n+1 resumes."""
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        now = rt.now()
        if turn.status != "running" or turn.lease_until is None or turn.lease_until >= now:
            return 0
        run = latest_run(db, turn_id)
        if run is not None:
            run.status, run.ended_at = "crashed", now
            run.error = {"code": "WORKER_LOST", "message": "the worker running this turn stopped renewing its lease"}
        db.execute(
            update(ToolCall).where(ToolCall.turn_id == turn_id, ToolCall.status == "running")
            .values(status="unknown", interrupted=ToolCall.interrupted + 1, updated_at=now)
        )
        db.add(Run(turn_id=turn_id, seq=(run.seq if run else 0) + 1, status="resuming", started_at=now))
        turn.status, turn.lease_until, turn.updated_at = "queued", None, now
        rt.enqueue(db, "run_turn", turn_id)
        log.warning("turn %s: recovered from a lost worker", turn_id)
        return 1


def requeue(rt: Runtime, turn_id: str) -> int:
    """A queued turn that no job will pick up (its job started and died without a retry): enqueue it again."""
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        if turn.status != "queued":
            return 0
        if blocking_turn(db, turn) is not None:
            return 0
        turn.updated_at = rt.now()
        rt.enqueue(db, "run_turn", turn_id)
        return 1


def redeliver(rt: Runtime) -> int:
    """Channel sessions with undelivered events and no delivery queued, and inbound items never applied whose
    job is no longer in the outbox, get their jobs again."""
    cutoff = rt.now() - timedelta(seconds=defaults.SWEEP_QUEUED_TURN_AFTER_SECONDS)
    sessions = stale_sessions(rt)
    with rt.db.read() as db:
        unapplied = list(db.execute(  # found by their partial index, however many rows are kept
            select(Inbound.id).where(UNPROCESSED, Inbound.received_at < cutoff).limit(500)).scalars())
        queued = owed(db, "process_inbound", unapplied)
    items = [i for i in unapplied if i not in queued]
    with rt.transaction() as db:
        for session_id in sessions:
            rt.enqueue(db, "deliver", session_id)
        for inbound_id in items:
            rt.enqueue(db, "process_inbound", inbound_id)
    return len(sessions) + len(items)


def push_outbox(rt: Runtime) -> int:
    """Push again the outbox rows whose job has not started a while after its push, and give them that while
    again. A row pushed after the oldest job still waiting in the queue is not pushed again: its job waits
    behind that one (a queue that far behind is not fed duplicates, which would put it further behind);
    once the queue has moved past it, a row still here was lost."""
    now = rt.now()
    cutoff = now - timedelta(seconds=defaults.SWEEP_OUTBOX_AFTER_SECONDS)
    waiting_since = rt.executor.waiting_since()
    if waiting_since is not None:
        cutoff = min(cutoff, waiting_since)
    with rt.transaction() as db:
        rows = [
            (row.id, row.job, list(row.args))
            for row in db.execute(
                select(Outbox).where(Outbox.available_at <= cutoff)
                .order_by(Outbox.id).limit(500).with_for_update(skip_locked=True)
            ).scalars()
        ]
        if rows:
            db.execute(update(Outbox).where(Outbox.id.in_([r[0] for r in rows])).values(available_at=now))
    if rows:
        rt.push(rows)
    return len(rows)


def owed(db: DbSession, job: str, firsts: Sequence[Any]) -> set[Any]:
    """Which of `firsts` have a `job` in the outbox (by its first argument): jobs pushed and not yet started,
    whose lost pushes push_outbox() recovers."""
    if not firsts:
        return set()
    wanted = set(firsts)
    args = db.execute(select(Outbox.args).where(Outbox.job == job)).scalars()
    return {a[0] for a in args if a and a[0] in wanted}


class Sweeper:
    """Runs sweep() every `seconds` in a daemon thread (each `hitl worker`, and the embedded server); the
    look for settled turns never resumed, on the first sweep and then every `settled_every` seconds."""

    def __init__(self, rt: Runtime, seconds: float,
                 settled_every: float = defaults.SWEEP_SETTLED_EVERY_SECONDS) -> None:
        self.rt, self.seconds, self.settled_every = rt, seconds, settled_every
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="hitl-sweeper", daemon=True)

    def start(self) -> Sweeper:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _loop(self) -> None:
        settled_at: float | None = None
        while not self._stop.wait(self.seconds):
            started = time.monotonic()
            settled = settled_at is None or started - settled_at >= self.settled_every
            try:
                sweep(self.rt, settled=settled)
            except Exception:  # the next round tries again
                log.exception("sweep failed")
            else:
                if settled:
                    settled_at = started
