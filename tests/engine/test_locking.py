"""Row locks on PostgreSQL: every writer takes a session's row before any of its turns' rows, so two writers
of one session queue instead of deadlocking, including the one statement that locks both."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from engine.jobs.runtime import Runtime
from engine.protocol import api_key_principal
from engine.store.db import Database
from engine.store.storage import pack_id
from engine.turns.sessions import open_session
from engine.turns.transitions import lock_turn_run
from tests.conftest import truncate_all
from tests.engine.test_outbox import Dropped
from tests.support.agent import agent as test_agent

WAIT = 10.0


@pytest.fixture
def rt(postgres_url: str) -> Iterator[Runtime]:
    truncate_all(postgres_url)
    runtime = Runtime(Database(postgres_url), test_agent, Dropped())  # no job runs: nothing else takes a lock
    yield runtime
    runtime.db.dispose()


def test_the_turn_lock_holds_the_session_row_while_it_waits_for_the_turn_row(rt: Runtime) -> None:
    opened = open_session(rt, api_key_principal("alice"), message="refund order 42")
    session_id, turn_id = pack_id(opened.session_id), pack_id(opened.turn_id)
    locked = threading.Event()
    with rt.db.engine.connect() as holder, rt.db.engine.connect() as probe:
        holder.execute(text("SELECT 1 FROM turns WHERE id = :id FOR UPDATE"), {"id": turn_id})

        def lock_both() -> None:
            with rt.transaction() as db:
                assert lock_turn_run(db, opened.turn_id) is not None
                locked.set()

        waiter = threading.Thread(target=lock_both)
        waiter.start()
        try:
            deadline = time.monotonic() + WAIT
            session_taken = False
            while not session_taken and time.monotonic() < deadline:
                try:
                    with probe.begin():
                        probe.execute(text("SELECT 1 FROM sessions WHERE id = :id FOR UPDATE NOWAIT"),
                                      {"id": session_id})
                except OperationalError as exc:
                    assert "could not obtain lock" in str(exc)
                    session_taken = True
                else:
                    time.sleep(0.02)
            assert session_taken, "the waiting transaction never held the session row"
            assert not locked.is_set(), "the turn row was taken while another transaction held it"
        finally:
            holder.rollback()
            waiter.join(WAIT)
    assert locked.is_set()


def test_an_unknown_turn_locks_nothing(rt: Runtime) -> None:
    with rt.transaction() as db:
        assert lock_turn_run(db, "turn_" + "0" * 26) is None
