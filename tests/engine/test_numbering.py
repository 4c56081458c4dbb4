"""Events and messages are numbered densely per session, whoever appends them: a transaction that holds the
session row (it counts in Python and writes the counters once, at commit) or one that does not (an UPDATE
reserves its seqs), across flushes, and from several threads at once. A turn's moves are written on its
table too, unless the turn has changes of its own waiting for the flush."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine.jobs.runtime import Runtime
from engine.store.db import Database, write_row
from engine.store.events import ONE_STATEMENT_ROWS, add_message, emit
from engine.store.storage import new_id
from engine.store.tables import Event, Message, Session, Turn
from engine.turns.transcript import load_messages
from engine.turns.transitions import lock_session, lock_turn
from tests.conftest import make_stack, recorded

WRITERS, TRANSACTIONS = 4, 10


@pytest.fixture(params=["sqlite", "postgres"])
def rt(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Runtime]:
    with make_stack(request, request.param, tmp_path) as built:
        yield built.rt


def new_session(rt: Runtime) -> str:
    with rt.transaction() as db:
        session = Session(agent="test", channel="api", address="api:numbering:")
        db.add(session)
        db.flush()
        return session.id


def append(rt: Runtime, session_id: str, *, held: bool, tag: str) -> None:
    """Two messages in two flushes and two events, in one transaction."""
    with rt.transaction() as db:
        if held:
            lock_session(db, session_id)
        append_in(db, rt, session_id, tag=tag)


def append_in(db: DbSession, rt: Runtime, session_id: str, *, tag: str) -> None:
    add_message(db, session_id, None, "user", content=f"{tag} a")
    db.flush()
    add_message(db, session_id, None, "user", content=f"{tag} b")
    for n in range(2):
        emit(db, session_id, "test.event", {"tag": tag, "n": n}, turn_id=None, at=rt.now())


def seqs(db: Database, session_id: str) -> tuple[list[int], list[int], tuple[int, int]]:
    with db.read() as s:
        events = list(s.execute(select(Event.seq).where(Event.session_id == session_id)
                                .order_by(Event.seq)).scalars())
        messages = list(s.execute(select(Message.seq).where(Message.session_id == session_id)
                                  .order_by(Message.seq)).scalars())
        session = s.get_one(Session, session_id)
        return events, messages, (session.event_seq, session.message_seq)


def test_held_and_unheld_transactions_number_in_turn(rt: Runtime) -> None:
    session_id = new_session(rt)
    for n, held in enumerate([True, False, True, True, False]):
        append(rt, session_id, held=held, tag=str(n))

    events, messages, counters = seqs(rt.db, session_id)

    assert events == list(range(1, 11))
    assert messages == list(range(1, 11))
    assert counters == (10, 10)
    with rt.db.read() as s:  # in the order they were appended
        contents = list(s.execute(select(Message.content).where(Message.session_id == session_id)
                                  .order_by(Message.seq)).scalars())
        data = list(s.execute(select(Event.data).where(Event.session_id == session_id).order_by(Event.seq)).scalars())
    assert contents == [f"{n} {x}" for n in range(5) for x in "ab"]
    assert data == [{"tag": str(n), "n": x} for n in range(5) for x in range(2)]


def test_a_rolled_back_transaction_leaves_no_gap(rt: Runtime) -> None:
    session_id = new_session(rt)
    append(rt, session_id, held=True, tag="kept")
    with pytest.raises(RuntimeError), rt.transaction() as db:
        lock_session(db, session_id)
        add_message(db, session_id, None, "user", content="lost")
        db.flush()
        raise RuntimeError("the step broke")
    append(rt, session_id, held=True, tag="after")

    assert seqs(rt.db, session_id) == ([1, 2, 3, 4], [1, 2, 3, 4], (4, 4))


def test_concurrent_writers_get_dense_seqs(rt: Runtime) -> None:
    session_id = new_session(rt)
    failures: list[BaseException] = []

    def write(writer: int) -> None:
        try:
            for n in range(TRANSACTIONS):
                append(rt, session_id, held=(writer + n) % 2 == 0, tag=f"{writer}.{n}")
        except BaseException as exc:  # noqa: BLE001  (reported by the test below)
            failures.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert failures == []
    events, messages, counters = seqs(rt.db, session_id)
    total = WRITERS * TRANSACTIONS * 2
    assert sorted(events) == list(range(1, total + 1))
    assert sorted(messages) == list(range(1, total + 1))
    assert counters == (total, total)


@pytest.mark.parametrize("read_first", [False, True])
def test_a_turn_new_in_the_transaction_is_written_before_its_messages(rt: Runtime, read_first: bool) -> None:
    """Messages are inserted on the table, after a flush of the transaction's objects: their turn exists by
    then (the foreign key holds), whether the commit inserts them or a read of the transcript does."""
    session_id = new_session(rt)
    with rt.transaction() as db:
        lock_session(db, session_id)
        turn = Turn(id=new_id("turn"), session_id=session_id, seq=1, input="hello")
        db.add(turn)  # not flushed
        add_message(db, session_id, turn.id, "user", content="hello")
        emit(db, session_id, "turn.started", {}, turn_id=turn.id, at=rt.now())
        if read_first:
            assert [m.turn_id for m in load_messages(db, session_id)] == [turn.id]

    assert seqs(rt.db, session_id) == ([1], [1], (1, 1))
    with rt.db.read() as s:
        assert s.execute(select(Message.turn_id).where(Message.session_id == session_id)).scalar_one() == turn.id


def test_the_transcript_read_in_a_transaction_holds_the_messages_it_appended(rt: Runtime) -> None:
    session_id = new_session(rt)
    append(rt, session_id, held=True, tag="before")
    with rt.transaction() as db:
        lock_session(db, session_id)
        add_message(db, session_id, None, "user", content="now")

        read = [(m.seq, m.content) for m in load_messages(db, session_id)]

        add_message(db, session_id, None, "assistant", content="after the read")

    assert read == [(1, "before a"), (2, "before b"), (3, "now")]
    assert seqs(rt.db, session_id) == ([1, 2], [1, 2, 3, 4], (2, 4))


def test_a_held_session_that_changed_keeps_its_change_and_its_counters(rt: Runtime) -> None:
    session_id = new_session(rt)
    with rt.transaction() as db:
        session = lock_session(db, session_id)
        append_in(db, rt, session_id, tag="x")
        session.status = "active"  # written by the commit's flush, the counters with it

    assert seqs(rt.db, session_id) == ([1, 2], [1, 2], (2, 2))
    with rt.db.read() as s:
        assert s.get_one(Session, session_id).status == "active"


def new_turn(rt: Runtime, session_id: str) -> str:
    with rt.transaction() as db:
        turn = Turn(id=new_id("turn"), session_id=session_id, seq=1, input="hello")
        db.add(turn)
        return turn.id


def turn_row(db: DbSession, turn_id: str) -> tuple[str, int]:
    """The turn's status and steps as its row holds them, not as the transaction's object does."""
    with db.no_autoflush:
        row = db.execute(select(Turn.status, Turn.steps).where(Turn.id == turn_id)).one()
    return row[0], row[1]


def test_a_transactions_messages_events_and_counters_are_one_statement_on_postgresql(rt: Runtime) -> None:
    """Two held sessions' messages, events and counters: one statement on PostgreSQL (data-modifying CTEs), one
    each on SQLite; numbered the same either way."""
    first, second = new_session(rt), new_session(rt)
    with recorded(rt.db.engine, "before_cursor_execute") as statements, rt.transaction() as db:
        for session_id in (first, second):
            lock_session(db, session_id)
        for session_id, tag in ((first, "one"), (second, "two")):
            add_message(db, session_id, None, "user", content=tag)
            for n in range(2 if session_id == first else 1):
                emit(db, session_id, "test.event", {"tag": tag, "n": n}, turn_id=None, at=rt.now())

    writes = [s for s in statements if "INSERT INTO messages" in s or "INSERT INTO events" in s
              or "UPDATE sessions" in s]
    assert len(writes) == (1 if rt.db.engine.dialect.name == "postgresql" else 3)
    assert seqs(rt.db, first) == ([1, 2], [1], (2, 1))
    assert seqs(rt.db, second) == ([1], [1], (1, 1))
    with rt.db.read() as s:
        assert s.execute(select(Message.content).where(Message.session_id == second)).scalar() == "two"
        assert s.execute(select(Event.data).where(Event.session_id == first, Event.seq == 2)).scalar() == \
            {"tag": "one", "n": 1}


def test_a_large_transactions_rows_are_written_by_a_statement_each(rt: Runtime) -> None:
    """Past `ONE_STATEMENT_ROWS` rows (a batch), PostgreSQL too takes an insert per table and the counters'
    update, numbered the same."""
    session_id = new_session(rt)
    with recorded(rt.db.engine, "before_cursor_execute") as statements, rt.transaction() as db:
        lock_session(db, session_id)
        add_message(db, session_id, None, "user", content="many")
        for n in range(ONE_STATEMENT_ROWS):
            emit(db, session_id, "test.event", {"n": n}, turn_id=None, at=rt.now())

    assert not [s for s in statements if s.startswith("WITH")]
    assert seqs(rt.db, session_id) == (list(range(1, ONE_STATEMENT_ROWS + 1)), [1], (ONE_STATEMENT_ROWS, 1))


def test_a_turn_with_nothing_to_flush_is_moved_on_its_table_at_once(rt: Runtime) -> None:
    turn_id = new_turn(rt, new_session(rt))
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)

        write_row(db, turn, status="running", steps=1)

        assert turn_row(db, turn_id) == ("running", 1)
        assert (turn.status, turn.steps) == ("running", 1)
        assert not db.dirty  # nothing is left for a flush

    with rt.db.read() as s:
        assert turn_row(s, turn_id) == ("running", 1)


def test_a_turn_with_a_change_of_its_own_gets_the_move_with_it_in_one_update(rt: Runtime) -> None:
    turn_id = new_turn(rt, new_session(rt))
    with recorded(rt.db.engine, "before_cursor_execute") as statements, rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        turn.steps += 1

        write_row(db, turn, status="waiting")

        assert turn_row(db, turn_id) == ("queued", 0)  # both wait for the flush

    updates = [s for s in statements if s.startswith("UPDATE turns")]
    assert len(updates) == 1
    with rt.db.read() as s:
        assert turn_row(s, turn_id) == ("waiting", 1)


def test_a_new_row_gets_the_values_with_its_insert(rt: Runtime) -> None:
    session_id = new_session(rt)
    with recorded(rt.db.engine, "before_cursor_execute") as statements, rt.transaction() as db:
        turn = Turn(id=new_id("turn"), session_id=session_id, seq=1, input="hello")
        db.add(turn)

        write_row(db, turn, status="running", steps=2)

    assert not [s for s in statements if s.startswith("UPDATE turns")]
    with rt.db.read() as s:
        assert turn_row(s, turn.id) == ("running", 2)


def test_a_row_is_written_by_attribute_where_its_column_has_another_name(rt: Runtime) -> None:
    session_id = new_session(rt)
    with rt.transaction() as db:
        session = lock_session(db, session_id)

        write_row(db, session, stored_address="api:written:")  # the column is `address`

        assert not db.dirty
    with rt.db.read() as s:
        assert s.get_one(Session, session_id).address == "api:written:"
