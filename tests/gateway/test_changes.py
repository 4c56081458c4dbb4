"""The process's poller that open event streams wait on (gateway/changes.py)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.changes import SESSION_EVENTS, Changes
from tests.conftest import Stack, recorded, sqlite_settings
from tests.support.agent import script


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def waiting(changes: Changes, key: str, seen: int, count: int, timeout: float = 10) -> list[threading.Thread]:
    threads = [threading.Thread(target=changes.wait, args=(SESSION_EVENTS, key, seen, timeout)) for _ in range(count)]
    for thread in threads:
        thread.start()
    return threads


def test_many_waiting_streams_cost_one_query_a_poll_and_wake_when_their_session_moves(sqlite_stack: Stack) -> None:
    session_id, _ = sqlite_stack.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    seen = len(sqlite_stack.events(session_id))
    changes = Changes(sqlite_stack.rt.db, interval=0.05)
    with recorded(sqlite_stack.rt.db.engine, "before_cursor_execute") as statements:
        threads = waiting(changes, session_id, seen, 50)
        time.sleep(0.5)  # about 10 polls, none of which finds anything new
        polls = [s for s in statements if "event_seq" in s and "FROM sessions" in s]
        assert 1 <= len(polls) <= 12 and all(thread.is_alive() for thread in threads)  # not 50 per poll
        started = time.monotonic()
        [pending] = sqlite_stack.pending(session_id)
        sqlite_stack.answer(pending["requestId"], "approve")
        for thread in threads:
            thread.join(5)
        assert not any(thread.is_alive() for thread in threads) and time.monotonic() - started < 2


def test_a_stream_of_a_session_that_is_gone_is_woken_to_find_out(sqlite_stack: Stack) -> None:
    changes = Changes(sqlite_stack.rt.db, interval=0.05)
    started = time.monotonic()
    changes.wait(SESSION_EVENTS, "ses_gone", 0, timeout=10)
    assert time.monotonic() - started < 1


def test_the_poller_reads_nothing_while_no_stream_waits(sqlite_stack: Stack) -> None:
    changes = Changes(sqlite_stack.rt.db, interval=0.05)
    changes.wait(SESSION_EVENTS, "ses_gone", 0, timeout=1)
    time.sleep(0.2)  # the poller saw nobody waiting and stopped
    with recorded(sqlite_stack.rt.db.engine, "before_cursor_execute") as statements:
        time.sleep(0.3)
    assert statements == []
