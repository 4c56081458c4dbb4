"""The transaction object: what one write transaction carries besides its SQLAlchemy session.

`Runtime.transaction()` (engine/jobs/runtime.py) begins a `Tx` with each write transaction and ends it with
explicit steps before the commit: deliver jobs for the sessions that got events, the job's hand-off, then the
transaction's messages, events and counters (`events.write_appended`: one statement on PostgreSQL, one each on
SQLite). No listener runs on other sessions; a read transaction (`Database.read()`) has no Tx.

Code that writes receives the SQLAlchemy session (`db`) and reaches the transaction's state with `Tx.of(db)`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.orm import Session as DbSession

from engine.store.tables import Session, Turn

_KEY = "hitl_tx"
"""Where a session keeps its Tx (`Session.info`): only this module reads or writes it."""

OutboxRow = tuple[int, str, list[Any]]
"""An outbox row: its id, its job and the job's arguments (engine/jobs/outbox.py)."""


@dataclass(eq=False)
class Tx:
    """One write transaction's state, dropped with it (a rolled back transaction leaves nothing behind)."""

    db: DbSession
    held: dict[str, Session] = field(default_factory=dict)
    """Sessions loaded with their row locked (`events.hold`), by id: their seqs are counted in memory."""
    counted: dict[str, tuple[int, int]] = field(default_factory=dict)
    """A held session's event and message seqs once this transaction numbered some: written back at commit."""
    events: list[dict[str, Any]] = field(default_factory=list)
    """Events appended and not inserted yet (rows of the events table, numbered at commit)."""
    messages: list[dict[str, Any]] = field(default_factory=list)
    """Transcript messages appended and not inserted yet (numbered when the transcript is read, or at commit)."""
    opened: set[str] = field(default_factory=set)
    """Turns this transaction opened an InputRequest of (pending until it commits)."""
    locked_turns: dict[str, Turn] = field(default_factory=dict)
    """Turns loaded with their row locked, by id (not read again)."""
    unjudged: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Candidates judged where they are stored: their rows, by id, inserted with their verdict."""
    outbox: list[OutboxRow] = field(default_factory=list)
    """The outbox rows this transaction wrote: pushed to the executor once it commits."""
    showing: dict[str, Any] = field(default_factory=dict)
    """Where requests this transaction opened are shown besides their session (engine/answers/showing.py's
    `Showing`), by request id, until `places.announce` shows them there."""

    @classmethod
    def begin(cls, db: DbSession) -> Tx:
        """The Tx of a write transaction just begun on `db`."""
        tx = db.info[_KEY] = cls(db)
        return tx

    @staticmethod
    def of(db: DbSession) -> Tx:
        """The Tx of the write transaction `db` runs (`Runtime.transaction()`); RuntimeError in any other."""
        tx = db.info.get(_KEY)
        if not isinstance(tx, Tx):
            raise RuntimeError("this needs a write transaction begun by Runtime.transaction()")
        return tx
