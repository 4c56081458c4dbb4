"""Events and messages are numbered densely per session, whoever appends them: a transaction that holds the
session row (it counts in Python and writes the counters once, at commit) or one that does not (an UPDATE
reserves its seqs), across flushes, and from several threads at once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from engine.db import Database
from engine.events import add_message, emit
from engine.runtime import Runtime
from engine.tables import Event, Message, Session
from engine.turns import lock_session
from tests.conftest import make_stack

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
