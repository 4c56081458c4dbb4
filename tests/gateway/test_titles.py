"""A session's title (its first message on one line, cut) in the session list, the history and the request inbox."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.store.queries import TITLE_LENGTH
from tests.conftest import TEST_AGENT, Stack, recorded, sqlite_settings
from tests.support.agent import script

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def test_sessions_and_requests_carry_the_title_of_their_session(stack: Stack) -> None:
    client = stack.client("alice")
    parked = client.post("/api/sessions", json={"message": REFUND}).get_json()["id"]
    short = client.post("/api/sessions", json={"message": "  hello\n\n  there\t"}).get_json()["id"]
    silent = client.post("/api/sessions", json={}).get_json()["id"]
    stack.wait_idle()
    long_title = REFUND[: TITLE_LENGTH - 1] + "…"  # the script is longer than a title, on one line already
    assert len(REFUND) > TITLE_LENGTH and len(long_title) == TITLE_LENGTH

    listed = {s["id"]: s for s in client.get("/api/sessions").get_json()["sessions"]}
    assert {sid: listed[sid]["title"] for sid in (parked, short, silent)} == {
        parked: long_title, short: "hello there", silent: None}
    assert client.get(f"/api/sessions/{parked}").get_json()["title"] == long_title
    assert client.get(f"/api/sessions/{silent}").get_json()["title"] is None
    client.post(f"/api/sessions/{silent}/input", json={"message": "second thoughts"})
    stack.wait_idle()
    assert client.get(f"/api/sessions/{silent}").get_json()["title"] == "second thoughts"  # its first message

    [request] = client.get("/api/requests", query_string={"status": "pending"}).get_json()["requests"]
    assert (request["sessionId"], request["title"], request["agent"], request["channel"]) == (
        parked, long_title, TEST_AGENT, "api")  # the session's agent, as HITL_AGENT names it
    one = client.get(f"/api/requests/{request['requestId']}").get_json()
    assert {key: one[key] for key in ("title", "agent", "channel")} == {
        "title": long_title, "agent": TEST_AGENT, "channel": "api"}


def test_titles_cost_no_query_per_row(sqlite_stack: Stack) -> None:
    """A page of sessions or requests takes as many statements for one row as for three."""
    client = sqlite_stack.client("alice")

    def statements(path: str) -> int:
        with recorded(sqlite_stack.rt.db.engine, "before_cursor_execute") as seen:
            assert client.get(path).status_code == 200
        return len(seen)

    client.post("/api/sessions", json={"message": REFUND})
    sqlite_stack.wait_idle()
    one = {path: statements(path) for path in ("/api/sessions", "/api/requests")}
    for _ in range(2):
        client.post("/api/sessions", json={"message": REFUND})
    sqlite_stack.wait_idle()
    assert len(client.get("/api/requests").get_json()["requests"]) == 3
    assert {path: statements(path) for path in one} == one
