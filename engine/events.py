"""Appending to a session: events (dense seq per session) and transcript messages."""

from __future__ import annotations

from datetime import datetime
from typing import Any, cast

from sqlalchemy import Table, event, select, update
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm.attributes import flag_modified, set_committed_value
from sqlalchemy.orm.util import identity_key

from .requests import as_opened
from .storage import PRINCIPAL
from .tables import Event, InputRequest, Message, Session

PENDING = "hitl_unnumbered"
UNSENT = "hitl_unsent_events"
HELD = "hitl_held_sessions"
COUNTED = "hitl_counted_seqs"


def emit(
    db: DbSession, session_id: str, type: str, data: dict[str, Any], *, turn_id: str | None, at: datetime
) -> Event:
    """Append one event to the session's stream. Nothing in a transaction reads back the events it wrote, so
    they are inserted, and numbered, together when it commits."""
    event = Event(session_id=session_id, type=type, turn_id=turn_id, data=data, at=at)
    db.info.setdefault(UNSENT, []).append(event)
    db.info.setdefault("event_sessions", set()).add(session_id)
    return event


def emit_received(db: DbSession, session_id: str, turn_id: str | None, text: str, principal: dict[str, Any] | None,
                  at: datetime) -> None:
    """`message.received`: its principal stored without keys (`events_wire` shows it whole)."""
    stored = PRINCIPAL.pack(principal) if principal else None
    emit(db, session_id, "message.received", {"text": text, "principal": stored}, turn_id=turn_id, at=at)


def emit_requested(db: DbSession, session_id: str, turn_id: str, requests: list[InputRequest], at: datetime) -> None:
    """`input.requested` for a batch of requests that just opened. It stores only their ids (their rows hold
    the rest): `events_wire` shows each request as it was opened."""
    emit(db, session_id, "input.requested", {"requestIds": [r.request_id for r in requests]}, turn_id=turn_id, at=at)


def add_message(db: DbSession, session_id: str, turn_id: str | None, role: str, **fields: Any) -> Message:
    """Append one message to the transcript the model sees (numbered when the transaction flushes)."""
    message = Message(session_id=session_id, turn_id=turn_id, role=role, **fields)
    _append(db, message)
    return message


def _append(db: DbSession, row: Event | Message) -> None:
    db.add(row)
    db.info.setdefault(PENDING, []).append(row)


def hold(db: DbSession, session: Session) -> None:
    """`session` was loaded with its row locked by this transaction: the seqs of its events and messages are
    counted from its counters here, and the counters written back once, when the transaction commits."""
    db.info.setdefault(HELD, {})[session.id] = session


def held(db: DbSession, session_id: str) -> Session | None:
    """The session this transaction holds (locked and loaded), if it does."""
    return cast(Session | None, db.info.get(HELD, {}).get(session_id))


@event.listens_for(DbSession, "before_commit")
def _send(db: DbSession) -> None:
    """The transaction's events are numbered now and inserted by the commit's flush, with the counters of the
    sessions it holds."""
    for row in db.info.pop(UNSENT, []):
        _append(db, row)
    _number(db)
    for session_id, (event_seq, message_seq) in db.info.pop(COUNTED, {}).items():
        session = db.info[HELD][session_id]
        session.event_seq, session.message_seq = event_seq, message_seq
        flag_modified(session, "event_seq")  # written even where an earlier flush's numbering already set it
        flag_modified(session, "message_seq")


@event.listens_for(DbSession, "after_rollback")
def _drop(db: DbSession) -> None:
    for key in (UNSENT, PENDING, COUNTED, HELD):
        db.info.pop(key, None)


@event.listens_for(DbSession, "before_flush")
def _before_flush(db: DbSession, _context: Any, _instances: Any) -> None:
    _number(db)


def _number(db: DbSession) -> None:
    """Give the events and messages about to be inserted their seqs, in the order they were appended. A held
    session's seqs come from its counters in this transaction; any other session's are reserved by one
    UPDATE, which takes the session row's lock, so concurrent writers of one session get dense seqs that
    commit in order."""
    rows: list[Event | Message] = db.info.pop(PENDING, [])
    wanted: dict[str, list[int]] = {}
    for row in rows:
        wanted.setdefault(row.session_id, [0, 0])[isinstance(row, Message)] += 1
    table = cast(Table, Session.__table__)
    sessions = table.c
    held, counted = db.info.get(HELD, {}), db.info.setdefault(COUNTED, {})
    next_seq: dict[tuple[str, bool], int] = {}
    for session_id, (events, messages) in wanted.items():
        if session_id in held:
            loaded = held[session_id]
            event_seq, message_seq = counted.get(session_id, (loaded.event_seq, loaded.message_seq))
            event_seq, message_seq = counted[session_id] = (event_seq + events, message_seq + messages)
        else:
            event_seq, message_seq = db.connection().execute(
                update(table).where(sessions.id == session_id)
                .values(event_seq=sessions.event_seq + events, message_seq=sessions.message_seq + messages)
                .returning(sessions.event_seq, sessions.message_seq)
            ).one()
            loaded = db.identity_map.get(identity_key(Session, session_id))
        if loaded is not None:  # keep a session object of this transaction in step with its counters
            set_committed_value(loaded, "event_seq", event_seq)
            set_committed_value(loaded, "message_seq", message_seq)
        next_seq[session_id, False] = event_seq - events + 1
        next_seq[session_id, True] = message_seq - messages + 1
    for row in rows:
        key = (row.session_id, isinstance(row, Message))
        row.seq, next_seq[key] = next_seq[key], next_seq[key] + 1


def events_wire(db: DbSession, events: list[Event]) -> list[dict[str, Any]]:
    """Events as the protocol shows them: an `input.requested` carries its requests in full, each as it was
    when it opened (one query for all of them). Events written before requests were stored by id carry them
    inline already."""
    ids = [i for e in events if e.type == "input.requested" for i in e.data.get("requestIds", [])]
    opened = {r.request_id: as_opened(r) for r in db.execute(
        select(InputRequest).where(InputRequest.request_id.in_(ids))).scalars()} if ids else {}

    def data(event: Event) -> dict[str, Any]:
        if event.type == "input.requested" and "requestIds" in event.data:
            return {"requests": [opened[i] for i in event.data["requestIds"]]}
        if event.type == "message.received":
            return {**event.data, "principal": PRINCIPAL.unpack(event.data.get("principal"))}
        return event.data

    return [{"seq": e.seq, "type": e.type, "turnId": e.turn_id, "at": e.at.isoformat(), "data": data(e)}
            for e in events]
