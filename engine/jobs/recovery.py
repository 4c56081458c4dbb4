"""sweep(): what makes a crashed worker or a down Redis lose nothing."""

from __future__ import annotations

import logging
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import timedelta
from typing import Self

from sqlalchemy import select, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.answers.options import APPROVE
from engine.answers.settlement import close_request
from engine.answers.submit import judge_again, unjudged_candidates
from engine.answers.timers import fire_timers
from engine.channels.delivery import stale_sessions
from engine.jobs.callbacks import due_callbacks
from engine.jobs.outbox import owed, push_outbox, take_handed_over
from engine.jobs.runtime import Runtime
from engine.protocol import TIMEOUT_PRINCIPAL
from engine.store.retention import prune
from engine.store.statuses import CallStatus, Outcome, RequestStatus, RunStatus, TurnStatus
from engine.store.tables import UNPROCESSED, Inbound, InputRequest, Run, ToolCall, Turn
from engine.turns.transitions import blocking_turn, latest_run, lock_session, lock_turn, schedule_resume

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
    callbacks: int = 0
    pushed: int = 0
    pruned: int = 0


def sweep(rt: Runtime, *, settled: bool = True) -> SweepReport:
    """Judge candidates whose process died while their response policy ran, expire overdue requests, send the
    reminders and make the escalations that fell due, recover dead runners' turns, resume settled ones (with
    `settled`: a query over every waiting turn), re-enqueue lost jobs and callbacks that fell due, push the
    outbox, and prune a batch of inbound rows past their retention."""
    report = SweepReport()
    now = rt.now()
    with rt.db.read() as db:
        expired = list(db.execute(
            select(Turn.id).where(Turn.status == TurnStatus.RUNNING, Turn.lease_until < now)
        ).scalars())
        open_requests = select(InputRequest.request_id).where(
            InputRequest.turn_id == Turn.id, InputRequest.status == RequestStatus.PENDING).exists()
        waiting = list(db.execute(  # settled but never resumed: one query, however many turns are parked
            select(Turn.id).where(Turn.status == TurnStatus.WAITING, ~open_requests)).scalars()) if settled else []
        stuck = list(db.execute(
            select(Turn.id).where(
                Turn.status == TurnStatus.QUEUED,
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
    report.callbacks = resend_callbacks(rt)
    report.pushed = push_outbox(rt)
    report.pruned = prune(rt)
    if report != SweepReport():
        log.info("sweep: %s", report)
    return report


def expire_requests(rt: Runtime) -> int:
    """Pending requests past `expiresAt` close as their `on_timeout` says: `expired` (a turn resumes as if they were
    denied or dismissed), or, where `approve` was set, approved by the app ("approved on timeout", never a
    person); an external request's callback hears it. A session's overdue requests close in one transaction: a
    text channel delivering between two expiries would post the prompt of a request about to expire."""
    with rt.db.read() as db:
        overdue = db.execute(
            select(InputRequest.session_id, InputRequest.request_id, InputRequest.turn_id, InputRequest.on_timeout)
            .where(InputRequest.status == RequestStatus.PENDING, InputRequest.expires_at < rt.now())
            .order_by(InputRequest.seq)
        ).all()
    by_session: dict[str, list[tuple[str, str | None, str | None]]] = {}
    for session_id, request_id, turn_id, on_timeout in overdue:
        by_session.setdefault(session_id, []).append((request_id, turn_id, on_timeout))
    count = 0
    for session_id, requests in by_session.items():
        with rt.transaction() as db:
            lock_session(db, session_id)
            closed = sum(time_out(rt, db, request_id, on_timeout) for request_id, _, on_timeout in requests)
            count += closed
            for turn_id in dict.fromkeys(turn_id for _, turn_id, _ in requests if turn_id is not None):
                schedule_resume(rt, db, lock_turn(db, turn_id, session_id))
    return count


def time_out(rt: Runtime, db: DbSession, request_id: str, on_timeout: str | None) -> bool:
    """Close an overdue request as its `on_timeout` says; False when it closed meanwhile."""
    if on_timeout == "approve":
        closed = close_request(rt, db, request_id, outcome=Outcome.APPROVED, response={"optionId": APPROVE["id"],
                               "text": None}, responder=TIMEOUT_PRINCIPAL)
    else:
        closed = close_request(rt, db, request_id, outcome=Outcome.EXPIRED, response=None, responder=None)
    return closed is not None


LEASE_RAN_OUT = {"code": "WORKER_LOST", "message": "the worker running this turn stopped renewing its lease"}
CONNECTION_LOST = {"code": "DATABASE_CONNECTION_LOST", "message": "the run lost its connection to the database"}


def recover_turn(rt: Runtime, turn_id: str, given_up: str | None = None) -> int:
    """A running turn whose lease ran out, or whose runner gave up its run `given_up` (it lost its database
    connection): its Run crashed, its running calls are `unknown`, Run n+1 resumes."""
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        now = rt.now()
        run = latest_run(db, turn_id)
        if given_up is not None:
            if turn.status != TurnStatus.RUNNING or run is None or run.id != given_up:
                return 0  # another runner took it over meanwhile, or the run ended after all
        elif turn.status != TurnStatus.RUNNING or turn.lease_until is None or turn.lease_until >= now:
            return 0
        if run is not None:
            run.status, run.ended_at = RunStatus.CRASHED, now
            run.error = dict(CONNECTION_LOST if given_up else LEASE_RAN_OUT)
        db.execute(
            update(ToolCall).where(ToolCall.turn_id == turn_id, ToolCall.status == CallStatus.RUNNING)
            .values(status=CallStatus.UNKNOWN, interrupted=ToolCall.interrupted + 1, updated_at=now)
        )
        db.add(Run(turn_id=turn_id, seq=(run.seq if run else 0) + 1, status=RunStatus.RESUMING, started_at=now))
        turn.status, turn.lease_until, turn.updated_at = TurnStatus.QUEUED, None, now
        rt.enqueue(db, "run_turn", turn_id)
        log.warning("turn %s: recovered from a %s", turn_id, "lost database connection" if given_up else "lost worker")
        return 1


def requeue(rt: Runtime, turn_id: str) -> int:
    """A queued turn that no job will pick up (its job started and died without a retry): enqueue it again."""
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        if turn.status != TurnStatus.QUEUED:
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


def resend_callbacks(rt: Runtime) -> int:
    """External requests' callbacks that fell due (a retry after its backoff, or an attempt whose worker died)
    and whose job is not in the outbox get one."""
    due = due_callbacks(rt)
    if not due:
        return 0
    with rt.db.read() as db:
        queued = owed(db, "send_callback", due)
    due = [request_id for request_id in due if request_id not in queued]
    with rt.transaction() as db:
        for request_id in due:
            rt.enqueue(db, "send_callback", request_id)
    return len(due)


class Periodic(ABC):
    """Runs `tick()` every `seconds` in a daemon thread until stopped. A failing tick is logged and the next
    tries again; a database out of reach is one line when it goes and one when it is back, not a traceback a tick."""

    name = "hitl-periodic"

    def __init__(self, rt: Runtime, seconds: float) -> None:
        self.rt, self.seconds = rt, seconds
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._unreachable = False

    def start(self) -> Self:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    @abstractmethod
    def tick(self) -> None:
        """One round's work."""

    def _loop(self) -> None:
        while not self._stop.wait(self.seconds):
            try:
                self.tick()
            except OperationalError as exc:
                if not self._unreachable:
                    log.error("%s: the database cannot be used (tried again every %ss): %s", self.name,
                              self.seconds, str(exc.orig).strip().splitlines()[0])
                self._unreachable = True
                continue
            except Exception:  # the next round tries again
                log.exception("%s failed", self.name)
            if self._unreachable:
                log.info("%s: the database is back", self.name)
                self._unreachable = False


class Sweeper(Periodic):
    """sweep() every `seconds` (each `hitl worker`, and the embedded server); the look for settled turns never
    resumed, on the first sweep and then every `settled_every` seconds."""

    name = "hitl-sweeper"

    def __init__(self, rt: Runtime, seconds: float,
                 settled_every: float = defaults.SWEEP_SETTLED_EVERY_SECONDS) -> None:
        super().__init__(rt, seconds)
        self.settled_every = settled_every
        self._settled_at: float | None = None

    def tick(self) -> None:
        started = time.monotonic()
        settled = self._settled_at is None or started - self._settled_at >= self.settled_every
        sweep(self.rt, settled=settled)
        if settled:
            self._settled_at = started


class HandOverPoll(Periodic):
    """take_handed_over() every `seconds` (the embedded server): a turn the CLI resumed starts within about that."""

    name = "hitl-hand-over"

    def tick(self) -> None:
        take_handed_over(self.rt)
