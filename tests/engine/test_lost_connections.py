"""A run that loses its PostgreSQL connection (a restart, a failover, a terminated backend) does not fail its turn:
the turn goes on in a new run, and an approved tool runs once."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from sqlalchemy import Connection, event

from gateway.settings import Settings
from tests.conftest import API_KEYS, TEST_AGENT, Stack, truncate_all
from tests.support.agent import read_ledger, script
from tests.support.faults import WRITES
from tests.support.services import conninfo

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 4})])


@pytest.fixture
def inline_postgres(postgres_url: str) -> Iterator[Stack]:
    """PostgreSQL with the in-process executor: the run happens in this process, where the test can cut it off."""
    truncate_all(postgres_url)
    stack = Stack("postgres", Settings(database_url=postgres_url, agent=TEST_AGENT, api_keys=API_KEYS,
                                       sweep_seconds=3600))
    yield stack
    stack.close()


def cut_before(stack: Stack, write: str) -> list[int]:
    """Terminate the backend of the connection about to make `write` (tests/support/faults.py), once: the write
    fails as on a lost connection. Returns the pids terminated."""
    cut: list[int] = []

    def before(conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any, many: bool) -> None:
        if not cut and WRITES[write].made_by(statement, parameters):
            cut.append(cursor.connection.info.backend_pid)
            with psycopg.connect(conninfo(stack.settings.database_url), autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", [cut[0]])

    event.listen(stack.rt.db.engine, "before_cursor_execute", before)
    return cut


@pytest.mark.parametrize(("write", "runs"), [
    ("claim", ["interrupted", "succeeded"]),  # cut before the tool ran: the resumed run is claimed again
    ("turn-completed", ["interrupted", "crashed", "succeeded"]),  # after: a new run records the answer
])
def test_a_run_that_loses_its_database_connection_goes_on_in_a_new_run(inline_postgres: Stack, write: str,
                                                                       runs: list[str]) -> None:
    stack = inline_postgres
    sid, _ = stack.start(REFUND)
    [request] = stack.pending(sid)
    cut = cut_before(stack, write)

    stack.answer(request["requestId"], "approve")

    assert cut
    turn = stack.turn(sid)
    assert turn["status"] == "completed", turn["error"]
    assert [r["status"] for r in turn["runs"]] == runs
    assert [e["charge_id"] for e in read_ledger() if e["tool"] == "refund"] == ["ch_1"]
    if "crashed" in runs:
        assert turn["runs"][1]["error"]["code"] == "DATABASE_CONNECTION_LOST"
