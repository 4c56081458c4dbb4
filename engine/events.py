"""Appending to a session: events (dense seq per session) and transcript messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.orm import Session as DbSession

from .tables import Event, Message, Session


def _bump(db: DbSession, session_id: str, column: Any) -> int:
    # The UPDATE takes the session row's lock, so concurrent writers of one session get dense, ordered seqs.
    return int(
        db.execute(
            update(Session).where(Session.id == session_id).values({column: column + 1}).returning(column)
        ).scalar_one()
    )


def emit(
    db: DbSession, session_id: str, type: str, data: dict[str, Any], *, turn_id: str | None, at: datetime
) -> Event:
    """Append one event to the session's stream."""
    event = Event(
        session_id=session_id, seq=_bump(db, session_id, Session.event_seq), type=type,
        turn_id=turn_id, data=data, at=at,
    )
    db.add(event)
    db.info.setdefault("event_sessions", set()).add(session_id)
    return event


def add_message(db: DbSession, session_id: str, turn_id: str | None, role: str, **fields: Any) -> Message:
    """Append one message to the transcript the model sees."""
    message = Message(
        session_id=session_id, turn_id=turn_id, seq=_bump(db, session_id, Session.message_seq), role=role,
        **fields,
    )
    db.add(message)
    return message


def event_wire(event: Event) -> dict[str, Any]:
    return {
        "seq": event.seq,
        "type": event.type,
        "turnId": event.turn_id,
        "at": event.at.isoformat(),
        "data": event.data,
    }
