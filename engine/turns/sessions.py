"""Sessions and the messages that start turns."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import cast

from sqlalchemy import Table, bindparam, func, insert, select, text
from sqlalchemy.orm import Session as DbSession

from engine.errors import InvalidInput
from engine.jobs.runtime import Runtime
from engine.protocol import Principal
from engine.store.statuses import ACTIVE_TURN, SessionStatus, TurnStatus
from engine.store.storage import new_id
from engine.store.tables import Session, Turn

_INSERT_SESSION = insert(cast(Table, Session.__table__))
_INSERT_TURN = insert(cast(Table, Turn.__table__))
"""Built once (see turns/transitions.py); their parameters are named after their columns."""
_LATEST_AT = select(Session.id) \
    .where(Session.channel == bindparam("channel"), Session.address == bindparam("address")) \
    .order_by(Session.created_at.desc()).limit(1)
_LOCK_PLACE = text("SELECT pg_advisory_xact_lock(:key)")


@dataclass(frozen=True)
class Opened:
    session_id: str
    turn_id: str | None


def open_session(
    rt: Runtime, initiator: Principal | None, *, channel: str = "api", address: str | None = None,
    message: str | None = None,
) -> Opened:
    """Create a session; a message starts its first turn. Its rows go out as INSERTs of their own: nothing in
    the transaction reads them back, so no object of theirs goes through the unit of work."""
    with rt.transaction() as db:
        status = SessionStatus.IDLE if message is None else SessionStatus.ACTIVE
        session_id = insert_session(rt, db, initiator, channel, address, status)
        if message is None:
            return Opened(session_id, None)
        turn_id = new_id("turn")
        insert_turn(rt, db, session_id, turn_id, 1, initiator, message)
        rt.enqueue(db, "run_turn", turn_id)
    return Opened(session_id, turn_id)


def insert_session(rt: Runtime, db: DbSession, initiator: Principal | None, channel: str, address: str | None,
                   status: str = SessionStatus.IDLE) -> str:
    """Write a new session's row; returns its id."""
    session_id, now = new_id("ses"), rt.now()
    db.connection().execute(_INSERT_SESSION, {
        "id": session_id, "agent": rt.agent_spec, "channel": channel, "address": address or "",
        "initiator": initiator.wire() if initiator else None, "status": status, "created_at": now, "updated_at": now,
    })
    return session_id


def latest_session_at(db: DbSession, channel: str, address: str) -> str | None:
    """The latest session at a channel address: the one a message there reaches."""
    return db.execute(_LATEST_AT, {"channel": channel, "address": address}).scalar_one_or_none()


def session_at(rt: Runtime, db: DbSession, channel: str, address: str, initiator: Principal | None) -> str:
    """The latest session at a channel address, or a new one there opened by `initiator`, in the caller's
    transaction. On PostgreSQL the place is locked first (a lock held until the transaction ends), so two
    transactions at once find or open the same one; SQLite writes one transaction at a time anyway."""
    if db.get_bind().dialect.name == "postgresql":
        digest = hashlib.sha256(f"hitl-place\x1f{channel}\x1f{address}".encode()).digest()
        db.execute(_LOCK_PLACE, {"key": int.from_bytes(digest[:8], "big", signed=True)})
    found = latest_session_at(db, channel, address)
    return found if found is not None else insert_session(rt, db, initiator, channel, address)


def queue_turn(rt: Runtime, db: DbSession, session: Session, principal: Principal | None, text: str) -> str:
    """A new turn for `text`: enqueued now when the session has no active turn, else it waits its turn."""
    seq = db.execute(select(func.coalesce(func.max(Turn.seq), 0)).where(Turn.session_id == session.id)).scalar_one()
    busy = db.execute(
        select(Turn.id).where(Turn.session_id == session.id, Turn.status.in_(ACTIVE_TURN)).limit(1)
    ).first()
    turn_id = new_id("turn")
    insert_turn(rt, db, session.id, turn_id, seq + 1, principal, text)
    if busy is None:
        session.status = SessionStatus.ACTIVE
        rt.enqueue(db, "run_turn", turn_id)
    return turn_id


def insert_turn(rt: Runtime, db: DbSession, session_id: str, turn_id: str, seq: int, principal: Principal | None,
                text: str) -> None:
    """Write a queued turn's row (InvalidInput when `text` has nothing to say)."""
    text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL
    if not text.strip():
        raise InvalidInput("a message needs some text")
    db.connection().execute(_INSERT_TURN, {
        "id": turn_id, "session_id": session_id, "seq": seq, "status": TurnStatus.QUEUED, "input": text,
        "requested_by": principal.wire() if principal else None, "created_at": rt.now(), "updated_at": rt.now(),
    })
