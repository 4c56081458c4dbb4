"""Turn and Run state transitions shared by the runner, the response path and recovery."""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.orm import Session as DbSession

from engine.answers.input_requests import opened_in
from engine.errors import NotFound
from engine.jobs.runtime import Runtime
from engine.store.db import write_row
from engine.store.events import add_message, emit, emit_received, held, hold
from engine.store.statuses import ACTIVE_TURN, RequestStatus, RunStatus, SessionStatus, TurnStatus
from engine.store.storage import new_id
from engine.store.tables import InputRequest, Run, Session, Turn
from engine.store.tx import Tx

log = logging.getLogger(__name__)


# The statements every turn runs, built once: building a statement and its cache key costs about as much
# CPU as running it (bench/README.md, "Statements built once"). Parameters are named after what they hold.
_ACTIVE_TURN = select(Turn).where(Turn.session_id == bindparam("session"), Turn.status.in_(ACTIVE_TURN)) \
    .order_by(Turn.seq).limit(1)
_LATEST_RUN_ID = select(Run.id).where(Run.turn_id == Turn.id).order_by(Run.seq.desc()).limit(1).scalar_subquery()
"""The id of a turn's latest run, as a column of a query on turns."""
_TURN_RUN_LOCKED = select(Session, Turn, _LATEST_RUN_ID).join(Turn, Turn.session_id == Session.id) \
    .where(Turn.id == bindparam("turn")).with_for_update(of=[Session, Turn])
_SESSION_LOCKED = select(Session).where(Session.id == bindparam("session")).with_for_update()
_TURN_LOCKED = select(Turn).where(Turn.id == bindparam("turn")).with_for_update()
_BLOCKING_TURN = select(Turn).where(
    Turn.session_id == bindparam("session"), Turn.seq < bindparam("seq"), Turn.status.in_(ACTIVE_TURN)
).order_by(Turn.seq).limit(1)
_LATEST_RUN = select(Run).where(Run.turn_id == bindparam("turn")).order_by(Run.seq.desc()).limit(1)
_PENDING_REQUESTS = select(func.count()).select_from(InputRequest).where(
    InputRequest.turn_id == bindparam("turn"), InputRequest.status == RequestStatus.PENDING)
_RESUMING_RUN = insert(Run).values(
    turn_id=bindparam("turn"), status=RunStatus.RESUMING, started_at=bindparam("now"),
    seq=select(func.coalesce(func.max(Run.seq), 0) + 1).where(Run.turn_id == bindparam("turn")).scalar_subquery(),
)
_END_RUN = update(Run).where(Run.id == bindparam("run"), Run.status.in_([RunStatus.RUNNING, RunStatus.RESUMING])) \
    .values(status=bindparam("run_status"), ended_at=bindparam("now"), error=bindparam("error"))
_NEXT_QUEUED_TURN = select(Turn).where(
    Turn.session_id == bindparam("session"), Turn.seq > bindparam("after"), Turn.status == TurnStatus.QUEUED
).order_by(Turn.seq).limit(1)
_FIRST_RUN = insert(Run).values(seq=1, status=RunStatus.RUNNING)
_RESUMED_RUN_RUNNING = update(Run).where(Run.turn_id == bindparam("turn"), Run.status == RunStatus.RESUMING) \
    .values(status=RunStatus.RUNNING, started_at=bindparam("now")).returning(Run.id)


def active_turn(db: DbSession, session_id: str) -> Turn | None:
    """The session's current turn: the earliest one not yet ended."""
    return db.execute(_ACTIVE_TURN, {"session": session_id}).scalar_one_or_none()


def lock_session(db: DbSession, session_id: str) -> Session:
    """Load a session with its row locked. The transaction holds it (`events.hold`): later `get()`s of the
    session in the same transaction read the identity map, and its events and messages are numbered without
    a statement each. A session the transaction holds already is not read again."""
    session = held(db, session_id)
    if session is not None:  # locked by an earlier statement of this transaction
        return session
    session = db.execute(_SESSION_LOCKED, {"session": session_id}).scalar_one_or_none()
    if session is None:
        raise NotFound(f"no session {session_id!r}", {"sessionId": session_id})
    hold(db, session)
    return session


def lock_turn_run(db: DbSession, turn_id: str) -> tuple[Session, Turn, str | None] | None:
    """A turn, its session and the id of its latest run, the session's row and the turn's locked by one
    statement (PostgreSQL locks them in the order `OF` names them: session first, as every writer takes
    them); None if there is no such turn. The transaction holds the session, as `lock_session` does."""
    row = db.execute(_TURN_RUN_LOCKED, {"turn": turn_id}).one_or_none()
    if row is None:
        return None
    session, turn, latest_run = row
    hold(db, session)
    Tx.of(db).locked_turns[turn_id] = turn
    return session, turn, latest_run


def lock_turn(db: DbSession, turn_id: str, session_id: str | None = None) -> Turn:
    """Load a turn with its row locked (PostgreSQL; SQLite already holds the database write lock).

    Locks are always taken session row first, then turn row: appending an event locks the session row
    too, so every transaction that holds a turn and emits takes them in the same order (no deadlock).
    A turn of the session this transaction holds (`session_id`) is locked alone; one it locked already is
    not read again.
    """
    locked_turns = Tx.of(db).locked_turns
    if turn_id in locked_turns:
        return locked_turns[turn_id]
    if session_id is not None and held(db, session_id) is not None:
        turn = db.execute(_TURN_LOCKED, {"turn": turn_id}).scalar_one()
        locked_turns[turn_id] = turn
        return turn
    locked = lock_turn_run(db, turn_id)
    if locked is None:
        raise NotFound(f"no turn {turn_id!r}", {"turnId": turn_id})
    return locked[1]


def lock_for(db: DbSession, request: InputRequest) -> Turn | None:
    """The turn a request belongs to, locked (with its session first, as `lock_turn` takes them); None for an
    external request, which has no turn: its session alone is locked."""
    if request.turn_id is None:
        lock_session(db, request.session_id)
        return None
    return lock_turn(db, request.turn_id, request.session_id)


def blocking_turn(db: DbSession, turn: Turn) -> Turn | None:
    """An earlier turn of the same session that has not ended: `turn` must wait for it."""
    return db.execute(_BLOCKING_TURN, {"session": turn.session_id, "seq": turn.seq}).scalar_one_or_none()


def latest_run(db: DbSession, turn_id: str) -> Run | None:
    return db.execute(_LATEST_RUN, {"turn": turn_id}).scalar_one_or_none()


def pending_requests(db: DbSession, turn_id: str) -> int:
    """How many of the turn's requests are pending. A request opens only by `open_request`, which notes its
    turn, and closes only by statements on the table (`close_request`): unless this transaction opened one
    for the turn, its unflushed changes cannot change the count, and wait for the next flush."""
    with nullcontext() if opened_in(db, turn_id) else db.no_autoflush:
        return int(db.execute(_PENDING_REQUESTS, {"turn": turn_id}).scalar_one())


def schedule_resume(rt: Runtime, db: DbSession, turn: Turn) -> bool:
    """A waiting turn whose requests are all settled gets Run n+1 (`resuming`) and a run_turn job.

    The caller holds the turn's lock; returns False when the turn is not resumable (still running, or
    a request is still pending), so calling it twice resumes once.
    """
    if turn.status != TurnStatus.WAITING or pending_requests(db, turn.id):
        return False
    db.connection().execute(_RESUMING_RUN, {"turn": turn.id, "now": rt.now()})  # numbered inside its INSERT
    write_row(db, turn, status=TurnStatus.QUEUED, updated_at=rt.now())
    rt.enqueue(db, "run_turn", turn.id)
    return True


def end_turn(
    rt: Runtime, db: DbSession, turn: Turn, run_id: str | None, status: str, *, result: str | None = None,
    error: dict[str, Any] | None = None,
) -> None:
    """Close the turn and its run `run_id` if still active (an interrupted run stays as it was), then start
    the session's next queued turn or report it idle."""
    now = rt.now()
    write_row(db, turn, status=status, result=result, error=error, lease_until=None, updated_at=now)
    if run_id is not None:
        run_status = {TurnStatus.COMPLETED: RunStatus.SUCCEEDED, TurnStatus.FAILED: RunStatus.FAILED,
                      TurnStatus.CANCELLED: RunStatus.CANCELLED}[TurnStatus(status)]
        db.connection().execute(_END_RUN, {"run": run_id, "run_status": run_status, "now": now, "error": error})
    if status == TurnStatus.COMPLETED:
        emit(db, turn.session_id, "turn.completed", {"result": result}, turn_id=turn.id, at=now)
    elif status == TurnStatus.FAILED:
        emit(db, turn.session_id, "turn.failed", {"error": error}, turn_id=turn.id, at=now)
    else:
        emit(db, turn.session_id, "turn.cancelled", {}, turn_id=turn.id, at=now)
    start_next_turn(rt, db, turn)


def start_next_turn(rt: Runtime, db: DbSession, ended: Turn) -> None:
    """Enqueue the oldest turn queued after `ended` (the session's earliest active turn until now), or mark
    the session idle and say so. The read flushes nothing: the only turn the transaction changed is the one
    that ended, and the query passes over it by its seq (its change goes out with the session's)."""
    session_id = ended.session_id
    session = db.get_one(Session, session_id)
    with db.no_autoflush:
        next_turn = db.execute(_NEXT_QUEUED_TURN, {"session": session_id, "after": ended.seq}).scalar_one_or_none()
    if next_turn is not None:
        session.status = SessionStatus.ACTIVE
        rt.enqueue(db, "run_turn", next_turn.id)
        return
    session.status = SessionStatus.IDLE
    session.updated_at = rt.now()
    emit(db, session_id, "session.waiting", {"wait": "next-user-message"}, turn_id=None, at=rt.now())


def claim(rt: Runtime, db: DbSession, turn_id: str) -> tuple[Turn, str] | None:
    """In the caller's transaction: move the turn from `queued` to `running` under its lock and open (or
    activate) its Run; returns the locked turn and the run's id, or None when the turn is not this job's to run."""
    locked = lock_turn_run(db, turn_id)
    if locked is None:
        return None
    session, turn, latest = locked
    if turn.status != TurnStatus.QUEUED or (turn.seq > 1 and blocking_turn(db, turn) is not None):
        return None
    if not rt.runs(session.agent):  # its tools and policies are not ours: a process that has its agent runs it
        log.error("turn %s: its session runs agent %s and this process %s: left queued for a process that runs "
                  "that agent (set HITL_AGENT alike in every process of the deployment)", turn_id, session.agent,
                  rt.agent_spec)
        return None
    now = rt.now()
    if session.status != SessionStatus.ACTIVE:  # (the usual case: it is, and an assignment would make it dirty)
        session.status = SessionStatus.ACTIVE
    moved: dict[str, Any] = {"status": TurnStatus.RUNNING, "lease_until": rt.lease_until(), "updated_at": now}
    run_id = None if latest is None else db.connection().execute(  # the run a resume opened, now running
        _RESUMED_RUN_RUNNING, {"turn": turn_id, "now": now}).scalar_one_or_none()
    if run_id is None:  # the turn's first run
        run_id = new_id("run")
        db.connection().execute(_FIRST_RUN, {"id": run_id, "turn_id": turn_id, "started_at": now})
        moved["step_budget"] = rt.agent.max_steps
        principal = turn.requested_by
        add_message(db, turn.session_id, turn_id, "user", content=turn.input, principal=principal)
        emit_received(db, turn.session_id, turn_id, turn.input, principal, now)
    write_row(db, turn, **moved)
    emit(db, turn.session_id, "turn.started", {"runId": run_id}, turn_id=turn_id, at=now)
    return turn, run_id
