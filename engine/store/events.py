"""Appending to a session: events (dense seq per session) and transcript messages."""

from __future__ import annotations

from datetime import datetime
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import Executable, Integer, Table, bindparam, column, insert, select, union_all, update
from sqlalchemy import cast as sql_cast
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm.attributes import flag_modified, set_committed_value
from sqlalchemy.orm.util import identity_key

from engine.answers.input_requests import as_opened
from engine.store.storage import PRINCIPAL
from engine.store.tables import Event, InputRequest, Message, Session, utcnow
from engine.store.tx import Tx

_SESSIONS = cast(Table, Session.__table__)
# built once (see turns/transitions.py); on the tables: a transaction's messages, events and counters take no ORM work
_MESSAGES, _EVENTS = cast(Table, Message.__table__), cast(Table, Event.__table__)
_INSERT_MESSAGES = insert(_MESSAGES)
_INSERT_EVENTS = insert(_EVENTS)
_WRITE_COUNTERS = update(_SESSIONS).where(_SESSIONS.c.id == bindparam("session")) \
    .values(event_seq=bindparam("events_to"), message_seq=bindparam("messages_to"))
_COUNTED = (column("session_id", _SESSIONS.c.id.type), column("events_to", Integer), column("messages_to", Integer))
"""The columns of the counters `_one_statement` writes (rows joined to the sessions they belong to)."""
ONE_STATEMENT_ROWS = 40
"""The most rows written by one statement: a turn's transaction writes a handful; a larger one (a batch) takes the
statements of SQLite, whose inserts SQLAlchemy batches within PostgreSQL's limit on parameters."""


def emit(
    db: DbSession, session_id: str, type: str, data: dict[str, Any], *, turn_id: str | None, at: datetime
) -> None:
    """Append one event to the session's stream; the events of a transaction are numbered and inserted
    together when it commits."""
    Tx.of(db).events.append({"session_id": session_id, "type": type, "turn_id": turn_id, "data": data, "at": at})


def emit_received(db: DbSession, session_id: str, turn_id: str | None, text: str, principal: dict[str, Any] | None,
                  at: datetime) -> None:
    """`message.received`: its principal stored without keys (`events_wire` shows it whole)."""
    stored = PRINCIPAL.pack(principal) if principal else None
    emit(db, session_id, "message.received", {"text": text, "principal": stored}, turn_id=turn_id, at=at)


def emit_requested(db: DbSession, session_id: str, turn_id: str | None, requests: list[InputRequest],
                   at: datetime, not_shown: list[dict[str, Any]] | None = None) -> None:
    """`input.requested` for a batch of requests that just opened. It stores only their ids (their rows hold
    the rest): `events_wire` shows each request as it was opened. `not_shown`: the `show_to` places left out
    (`{requestId, place, reason}`, engine/answers/places.py), when there are any."""
    data: dict[str, Any] = {"requestIds": [r.request_id for r in requests]}
    if not_shown:
        data["notShown"] = not_shown
    emit(db, session_id, "input.requested", data, turn_id=turn_id, at=at)


def add_message(
    db: DbSession, session_id: str, turn_id: str | None, role: str, *, content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None, tool_call_id: str | None = None,
    principal: dict[str, Any] | None = None,
) -> None:
    """Append one message to the transcript the model sees: numbered and inserted when the transaction
    reads the transcript (`insert_messages`) or commits."""
    Tx.of(db).messages.append({
        "session_id": session_id, "turn_id": turn_id, "role": role, "content": content, "tool_calls": tool_calls,
        "tool_call_id": tool_call_id, "principal": principal, "created_at": utcnow(),
    })


def insert_messages(db: DbSession) -> None:
    """Number and insert the messages this transaction appended and has not inserted yet (before it reads
    the transcript)."""
    tx = Tx.of(db)
    messages, tx.messages = tx.messages, []
    if messages:
        _number(tx, messages, [])
        db.flush()  # first: the turn they belong to, if new in this transaction
        db.connection().execute(_INSERT_MESSAGES, messages)


def hold(db: DbSession, session: Session) -> None:
    """`session` was loaded with its row locked by this transaction: the seqs of its events and messages are
    counted from its counters here, and the counters written back once, when the transaction commits."""
    Tx.of(db).held[session.id] = session


def held(db: DbSession, session_id: str) -> Session | None:
    """The session this transaction holds (locked and loaded), if it does."""
    return Tx.of(db).held.get(session_id)


def committed_message_seq(db: DbSession, session_id: str) -> int | None:
    """The seq of the session's last transcript message as committed when this transaction locked its row
    (no writer can append one while the lock is held); None unless the transaction holds the session and has
    numbered none of its messages yet."""
    tx = Tx.of(db)
    session = tx.held.get(session_id)
    if session is None or session_id in tx.counted:
        return None
    return session.message_seq


def write_appended(tx: Tx) -> None:
    """The last step of a transaction before it commits (`Runtime.transaction()`): number its messages and
    events, flush, then insert them and write the counters of the sessions it holds: one statement on
    PostgreSQL (`_one_statement`; one each for more than `ONE_STATEMENT_ROWS` rows), one each elsewhere. A held
    session with changes of its own gets its counters written by the flush, with those changes."""
    db = tx.db
    (messages, tx.messages), (events, tx.events) = (tx.messages, []), (tx.events, [])
    _number(tx, messages, events)
    counters = []
    for session_id, (event_seq, message_seq) in tx.counted.items():
        session = tx.held[session_id]
        if db.is_modified(session):
            session.event_seq, session.message_seq = event_seq, message_seq
            flag_modified(session, "event_seq")  # written even where an earlier numbering set it
            flag_modified(session, "message_seq")
        else:  # (its object has them already: `_number`)
            counters.append({"session": session_id, "events_to": event_seq, "messages_to": message_seq})
    writes = [(statement, rows) for statement, rows in (
        (_INSERT_MESSAGES, messages), (_INSERT_EVENTS, events), (_WRITE_COUNTERS, counters)) if rows]
    if not writes:
        return
    db.flush()  # first: a turn new in this transaction is inserted before its messages
    connection = db.connection()
    if len(writes) > 1 and connection.dialect.name == "postgresql" and \
            len(messages) + len(events) + len(counters) <= ONE_STATEMENT_ROWS:
        shape = [(len(rows), tuple(rows[0]) if rows else ()) for rows in (messages, events)]
        connection.execute(_one_statement(*shape, len(counters)), _parameters(messages, events, counters))
        return
    for statement, rows in writes:
        connection.execute(statement, rows)


@lru_cache(maxsize=64)
def _one_statement(messages: tuple[int, tuple[str, ...]], events: tuple[int, tuple[str, ...]],
                   counters: int) -> Executable:
    """The PostgreSQL statement that writes a transaction's messages, events and counters (how many of each, and
    the keys of a message's and an event's row): the inserts as data-modifying CTEs of the last of them (all
    run on one snapshot; the rows' foreign keys are checked when the statement ends). At least two of the
    three are written. Built once per shape, of bound parameters (`_parameters`) in `SELECT ... UNION ALL`
    rows (a multi-row `VALUES` is not cached by SQLAlchemy: it would be compiled at every commit)."""
    parts: list[Any] = []
    for prefix, table, (count, keys) in (("m", _MESSAGES, messages), ("e", _EVENTS, events)):
        if count:
            parts.append(insert(table).from_select(  # (the rows carry every column: `emit`, `add_message`)
                list(keys), _rows(prefix, count, [table.c[key] for key in keys]), include_defaults=False))
    if counters:
        counted = _rows("c", counters, list(_COUNTED)).subquery("counted")
        parts.append(update(_SESSIONS).where(_SESSIONS.c.id == counted.c.session_id)
                     .values(event_seq=counted.c.events_to, message_seq=counted.c.messages_to))
    *ctes, last = parts
    return cast(Executable, last.add_cte(*(part.cte(f"write_{i}") for i, part in enumerate(ctes))))


def _rows(prefix: str, count: int, columns: list[Any]) -> Any:
    """`count` rows of bound parameters named `<prefix><row>_<column>`, each cast to its column's type (a NULL
    would otherwise be text to PostgreSQL)."""
    selects = [select(*(sql_cast(bindparam(f"{prefix}{i}_{c.name}", type_=c.type), c.type).label(c.name)
                        for c in columns)) for i in range(count)]
    return selects[0] if count == 1 else union_all(*selects)


def _parameters(messages: list[dict[str, Any]], events: list[dict[str, Any]],
                counters: list[dict[str, Any]]) -> dict[str, Any]:
    """The bound values of `_one_statement`."""
    bound: dict[str, Any] = {}
    for prefix, rows in (("m", messages), ("e", events)):
        for i, row in enumerate(rows):
            bound.update((f"{prefix}{i}_{key}", value) for key, value in row.items())
    for i, row in enumerate(counters):
        bound.update({f"c{i}_session_id": row["session"], f"c{i}_events_to": row["events_to"],
                      f"c{i}_messages_to": row["messages_to"]})
    return bound


def _number(tx: Tx, messages: list[dict[str, Any]], events: list[dict[str, Any]]) -> None:
    """Give the messages and events about to be inserted their seqs, in the order they were appended. A held
    session's seqs come from its counters in this transaction; any other session's are reserved by one
    UPDATE, which takes the session row's lock, so concurrent writers of one session get dense seqs that
    commit in order."""
    wanted: dict[str, list[int]] = {}
    for kind, rows in enumerate((events, messages)):
        for row in rows:
            wanted.setdefault(row["session_id"], [0, 0])[kind] += 1
    sessions, db = _SESSIONS.c, tx.db
    held, counted = tx.held, tx.counted
    next_seq: dict[tuple[str, int], int] = {}
    for session_id, (event_count, message_count) in wanted.items():
        loaded: Session | None = held.get(session_id)
        if loaded is not None:
            event_seq, message_seq = counted.get(session_id, (loaded.event_seq, loaded.message_seq))
            event_seq, message_seq = counted[session_id] = (event_seq + event_count, message_seq + message_count)
        else:
            event_seq, message_seq = db.connection().execute(
                update(_SESSIONS).where(sessions.id == session_id)
                .values(event_seq=sessions.event_seq + event_count, message_seq=sessions.message_seq + message_count)
                .returning(sessions.event_seq, sessions.message_seq)
            ).one()
            loaded = db.identity_map.get(identity_key(Session, session_id))
        if loaded is not None:  # keep a session object of this transaction in step with its counters
            set_committed_value(loaded, "event_seq", event_seq)
            set_committed_value(loaded, "message_seq", message_seq)
        next_seq[session_id, 0] = event_seq - event_count + 1
        next_seq[session_id, 1] = message_seq - message_count + 1
    for kind, rows in enumerate((events, messages)):
        for row in rows:
            key = (row["session_id"], kind)
            row["seq"], next_seq[key] = next_seq[key], next_seq[key] + 1


def events_wire(db: DbSession, events: list[Event]) -> list[dict[str, Any]]:
    """Events as the protocol shows them: an `input.requested` carries its requests in full, each as it was
    when it opened (one query for all of them). Events written before requests were stored by id carry them
    inline already."""
    ids = [i for e in events if e.type == "input.requested" for i in e.data.get("requestIds", [])]
    opened = {r.request_id: as_opened(r) for r in db.execute(
        select(InputRequest).where(InputRequest.request_id.in_(ids))).scalars()} if ids else {}

    def data(event: Event) -> dict[str, Any]:
        if event.type == "input.requested" and "requestIds" in event.data:  # (and `escalatedFrom`, at a place a
            # request escalated to: the session it came from)
            rest = {key: value for key, value in event.data.items() if key != "requestIds"}
            return {"requests": [opened[i] for i in event.data["requestIds"]], **rest}
        if event.type == "message.received":
            return {**event.data, "principal": PRINCIPAL.unpack(event.data.get("principal"))}
        return event.data

    return [{"seq": e.seq, "type": e.type, "turnId": e.turn_id, "at": e.at.isoformat(), "data": data(e)}
            for e in events]
