"""Storage stays small and fast: sweep() prunes inbound rows past HITL_RETENTION_DAYS (and only those), a batch
at a time; the sweep and the session list read their rows through indexes (EXPLAIN on PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import event, func, select, text

from engine.channels.contract import Answers, Ignored
from engine.channels.contract import Message as InboundMessage
from engine.channels.inbound import accept
from engine.jobs.executors import InlineExecutor
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.people import save_person
from engine.protocol import InputResponse, api_key_principal
from engine.store.db import Database
from engine.store.queries import list_requests, list_sessions
from engine.store.retention import prune
from engine.store.storage import principal_digest
from engine.store.tables import (
    Event,
    Inbound,
    InputRequest,
    Message,
    Outbox,
    PrunedInbound,
    ResponseCandidate,
    Run,
    Session,
    ToolCall,
    Turn,
)
from engine.turns.sessions import open_session
from tests.conftest import truncate_all
from tests.engine.test_outbox import Dropped
from tests.support.agent import agent as test_agent
from tests.support.agent import read_ledger, script

ALICE = api_key_principal("alice")
DAY = timedelta(days=1)
AUDIT = (Session, Turn, Run, InputRequest, ResponseCandidate, ToolCall, Event, Message)


class Clock:
    """Stands still at `now` until the test moves it."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """A migrated database of the test's own (PostgreSQL: this test session's, emptied)."""
    if request.param == "sqlite":
        database = Database(f"sqlite:///{tmp_path / 'hitl.db'}")
        database.upgrade()
    else:
        url = request.getfixturevalue("postgres_url")
        truncate_all(url)
        database = Database(url)
    yield database
    database.dispose()


@pytest.fixture
def clocked(db: Database) -> Iterator[tuple[Runtime, Clock]]:
    """A runtime on `db` with in-process jobs and a clock the test moves."""
    clock = Clock(Runtime(db, test_agent, InlineExecutor(1)).now())
    rt = Runtime(db, test_agent, InlineExecutor(1), clock=clock)
    yield rt, clock
    if isinstance(rt.executor, InlineExecutor):
        rt.executor.shutdown()


def inbound_ids(rt: Runtime) -> list[str]:
    with rt.db.read() as db:
        return sorted(db.execute(select(Inbound.external_id)).scalars())


def counts(rt: Runtime, tables: tuple[type[Any], ...]) -> dict[str, int]:
    with rt.db.read() as db:
        return {table.__tablename__: db.execute(select(func.count()).select_from(table)).scalar_one()
                for table in tables}


def test_the_sweep_prunes_inbound_rows_done_with_after_the_retention_and_keeps_the_rest(
        clocked: tuple[Runtime, Clock]) -> None:
    """Alice's refund approved from a channel: the click (applied), its retry (counted on the click) and a ping
    (audit only) go once they are 30 days old; an item never applied stays, and so does its job's outbox row;
    the audit trail of the conversation is whole."""
    rt, clock = clocked
    inline = rt.executor
    assert isinstance(inline, InlineExecutor)
    opened = open_session(rt, ALICE, message=script([("refund", {"charge_id": "ch_1", "amount": 20})]))
    assert inline.join()
    [request] = list_requests(rt, status="pending")["requests"]
    click = Answers((InputResponse(request_id=request["requestId"], option_id="approve"),))
    assert accept(rt, "fake", "click-1", ALICE, b"{}", click)
    assert inline.join()
    assert [e["tool"] for e in read_ledger()] == ["refund"]
    assert not accept(rt, "fake", "click-1", ALICE, b"{}", click)  # the platform's retry
    accept(rt, "fake", "ping-1", None, b"{}", None)
    accept(rt, "fake", "bot-1", None, b"{}", Ignored("a bot's message"))
    assert inline.join()
    rt.executor = Dropped()  # the next item's job is lost (and so are the sweep's pushes of it)
    accept(rt, "fake", "msg-1", ALICE, b"{}", InboundMessage("fake:room:1", "hello?"))
    audit = counts(rt, AUDIT)
    assert all(audit.values()), audit

    clock.now += 29 * DAY
    assert sweep(rt).pruned == 0
    assert not accept(rt, "fake", "click-1", ALICE, b"{}", click)  # still a duplicate within the retention
    assert inbound_ids(rt) == ["bot-1", "click-1", "msg-1", "ping-1"]

    clock.now += 2 * DAY
    assert sweep(rt).pruned == 3

    assert inbound_ids(rt) == ["msg-1"]  # never applied: the sweep still owes it its job
    with rt.db.read() as db:
        unapplied = db.execute(select(Inbound.id)).scalar_one()
        assert db.execute(select(Outbox.job, Outbox.args)).all() == [("process_inbound", [unapplied])]
        assert db.execute(select(PrunedInbound.channel, PrunedInbound.deliveries, PrunedInbound.duplicates)
                          ).all() == [("fake", 3, 2)]
    assert counts(rt, AUDIT) == audit
    [session] = list_sessions(rt)["sessions"]
    assert session["id"] == opened.session_id


def test_one_sweep_prunes_one_batch_the_oldest_first(clocked: tuple[Runtime, Clock]) -> None:
    rt, clock = clocked
    for day in range(5):
        accept(rt, "fake", f"ping-{day}", None, b"{}", None)
        clock.now += DAY
    clock.now += 30 * DAY

    assert prune(rt, batch=2) == 2
    assert inbound_ids(rt) == ["ping-2", "ping-3", "ping-4"]
    assert [prune(rt, batch=2) for _ in range(3)] == [2, 1, 0]


Query = tuple[str, Any]


def statements_of(db: Database, call: Callable[[], object], *words: str) -> list[Query]:
    """The statements `call` runs that contain every one of `words`, with their parameters."""
    seen: list[Query] = []

    def record(conn: Any, cursor: Any, statement: str, parameters: Any, *rest: Any) -> None:
        if all(word in statement for word in words):
            seen.append((statement, parameters))

    event.listen(db.engine, "before_cursor_execute", record)
    try:
        call()
    finally:
        event.remove(db.engine, "before_cursor_execute", record)
    return seen


def plan(db: Database, query: Query) -> str:
    statement, parameters = query
    with db.engine.connect() as conn:
        return "\n".join(conn.exec_driver_sql(f"EXPLAIN {statement}", parameters).scalars())


@pytest.fixture
def crowded(postgres_url: str) -> Iterator[Runtime]:
    """PostgreSQL with 5,000 sessions and 5,000 applied inbound rows (analyzed), and a runtime whose jobs are
    dropped."""
    truncate_all(postgres_url)
    database = Database(postgres_url)
    with database.engine.begin() as conn:
        conn.execute(text(
            "INSERT INTO sessions (id, agent, channel, address, status, event_seq, message_seq, delivered_seq, "
            "delivery_queued, created_at, updated_at) SELECT '\\x00'::bytea || convert_to('ses-' || g, 'UTF8'), "
            "'a', 'api', '', 'idle', 0, 0, 0, false, now() - g * interval '1 minute', now() "
            "FROM generate_series(1, 5000) g"))
        conn.execute(text(
            "INSERT INTO inbound (channel, external_id, received_at, payload_digest, item, processed_at, "
            "duplicates) SELECT 'fake', 'evt-' || g, now() - g * interval '1 minute', sha256(g::text::bytea), "
            "'{\"type\": \"ignored\"}', now(), 0 FROM generate_series(1, 5000) g"))
        conn.execute(text("ANALYZE sessions"))
        conn.execute(text("ANALYZE inbound"))
    yield Runtime(database, test_agent, Dropped())
    database.dispose()


def test_the_sweep_reads_inbound_rows_through_their_indexes(crowded: Runtime) -> None:
    """It looks for items never applied in their partial index and for rows to prune in the oldest first: no
    scan of the whole table, however many rows are kept."""
    [unprocessed] = statements_of(crowded.db, lambda: sweep(crowded), "FROM inbound", "processed_at IS NULL",
                                  "item IS NOT NULL")
    [prunable] = statements_of(crowded.db, lambda: sweep(crowded), "DELETE FROM inbound")

    assert "Index Scan using ix_inbound_unprocessed_received_at on inbound" in plan(crowded.db, unprocessed)
    assert "using ix_inbound_received_at on inbound" in plan(crowded.db, prunable)
    assert "Seq Scan" not in plan(crowded.db, unprocessed) + plan(crowded.db, prunable)


def test_the_session_list_reads_the_newest_sessions_through_its_index(crowded: Runtime) -> None:
    """GET /api/sessions, first page and the next: newest first from an index, no sort of every session."""
    [first_page] = statements_of(crowded.db, lambda: list_sessions(crowded, limit=100), "FROM sessions ORDER BY")
    older = list_sessions(crowded, limit=100)["next"]
    [next_page] = statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, before=older),
                                "FROM sessions", "ORDER BY")

    for query in (first_page, next_page):
        read = plan(crowded.db, query)
        assert "Index Scan Backward using ix_sessions_created_at_id on sessions" in read, read
        assert "Sort" not in read, read



def test_a_persons_session_list_reads_their_sessions_through_an_index(crowded: Runtime) -> None:
    """GET /api/sessions for a key linked to a person: a page of the sessions it started, read from its digest's
    index in order, and a page of those its person's other principals started, from the same index on their principal
    ids (those older than the cursor); this page is the newest of both. A key that is nobody's reads the same way
    (its person's part finds nobody at once), in as many statements as the operator's list."""
    carol = api_key_principal("carol")
    with crowded.db.engine.begin() as conn:
        conn.execute(text("UPDATE sessions SET initiator_id = CASE WHEN random() < 0.5 THEN 'slack:T1:U1' ELSE "
                          "'twilio:+15551230001' END WHERE random() < 0.1"))
        conn.execute(text("UPDATE sessions SET initiator_digest = sha256(convert_to(initiator_id, 'UTF8')) "
                          "WHERE initiator_id IS NOT NULL"))
        conn.execute(text("UPDATE sessions SET initiator_id = 'carol', initiator_digest = :carol "
                          "WHERE initiator_id IS NULL AND random() < 0.1"),
                     {"carol": bytes.fromhex(principal_digest(carol.wire()) or "")})
        conn.execute(text("ANALYZE sessions"))
    with crowded.transaction() as db:
        save_person(db, "alice", None, ["slack:T1:U1", "alice"])

    [first_page] = statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, seen_by=ALICE),
                                 "FROM sessions", "ORDER BY")
    older = list_sessions(crowded, limit=100, seen_by=ALICE)["next"]
    assert older is not None  # (a tenth of the sessions are hers: several pages)
    [next_page] = statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, before=older, seen_by=ALICE),
                                "FROM sessions", "ORDER BY")
    [unlinked] = statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, seen_by=carol),
                               "FROM sessions", "ORDER BY")

    for query in (first_page, next_page, unlinked):
        read = plan(crowded.db, query)
        assert "Scan Backward using ix_sessions_initiator_id_created_at" in read, read  # its own, in order
        assert "Bitmap Index Scan on ix_sessions_initiator_id_created_at" in read, read  # its person's others'
        assert "Seq Scan" not in read and "ix_sessions_created_at_id" not in read, read
    everyone = len(statements_of(crowded.db, lambda: list_sessions(crowded, limit=100)))
    assert len(statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, seen_by=ALICE))) == everyone
    assert len(statements_of(crowded.db, lambda: list_sessions(crowded, limit=100, seen_by=carol))) == everyone
