"""Who may see and do what through the REST API (docs/access.md): API key roles, /api/me, and 404 for what a
key may not see.

alice and bob are users, `bob:operator` is bob's operator key, `bot:agent` an agent's (tests/conftest.py).
Lists are read on both stacks (their filters are SQL); single routes on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from tests.conftest import Stack, sqlite_settings
from tests.gateway.test_api import LOOKUP, REFUND, created, event_count, expect_error, parked, pending_ids, ran

SSE = {"Accept": "text/event-stream"}


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def ids(client: FlaskClient, path: str, key: str, **query: str) -> list[str]:
    response = client.get(path, query_string=query)
    assert response.status_code == 200, response.get_data(as_text=True)
    return [item["id" if key == "sessions" else "requestId"] for item in response.get_json()[key]]


# every route that names a session or a request, as a client that may not see them calls it
ROUTES: dict[str, tuple[str, str, dict[str, Any] | None, dict[str, str]]] = {
    "history": ("GET", "/api/sessions/{sid}", None, {}),
    "events": ("GET", "/api/sessions/{sid}/events", None, {}),
    "event-stream": ("GET", "/api/sessions/{sid}/events", None, SSE),
    "message": ("POST", "/api/sessions/{sid}/input", {"message": LOOKUP}, {}),
    "input": ("POST", "/api/sessions/{sid}/input", {"inputResponses": [{"requestId": "{rid}", "optionId": "approve"}]},
              {}),
    "cancel": ("POST", "/api/sessions/{sid}/cancel", None, {}),
    "request": ("GET", "/api/requests/{rid}", None, {}),
    "answer": ("PATCH", "/api/requests/{rid}", {"optionId": "approve"}, {}),
}


def call(client: FlaskClient, route: str, session_id: str, request_id: str) -> TestResponse:
    method, path, body, headers = ROUTES[route]
    if body is not None and "inputResponses" in body:
        body = {"inputResponses": [{"requestId": request_id, "optionId": "approve"}]}
    return client.open(path.format(sid=session_id, rid=request_id), method=method, json=body, headers=headers)


def test_another_users_session_and_requests_answer_404_everywhere_and_nothing_changes(sqlite_stack: Stack) -> None:
    """What alice started does not exist for bob: the same 404 as for an id nobody has, on every route."""
    alice, bob = sqlite_stack.client("alice"), sqlite_stack.client("bob")
    session_id, request_id = parked(sqlite_stack, alice)
    before = event_count(alice, session_id)

    for route in ROUTES:
        theirs = call(bob, route, session_id, request_id)
        nobodys = call(bob, route, "ses_nope", "req_nope")
        error = expect_error(theirs, 404, "not_found")
        assert error["message"] == nobodys.get_json()["error"]["message"].replace("ses_nope", session_id) \
            .replace("req_nope", request_id), route

    sqlite_stack.wait_idle()
    assert ids(bob, "/api/sessions", "sessions") == []
    assert ids(bob, "/api/requests", "requests") == []
    assert ids(bob, "/api/requests", "requests", sessionId=session_id) == []
    for path, cursor in (("/api/sessions", {"before": session_id}), ("/api/requests", {"after": request_id})):
        [parameter] = cursor
        error = expect_error(bob.get(path, query_string=cursor), 400, "invalid_query")  # as for an unknown id
        assert error["details"] == {"parameter": parameter}
    assert pending_ids(alice, session_id) == [request_id]
    assert event_count(alice, session_id) == before
    assert alice.get(f"/api/sessions/{session_id}").get_json()["turns"][0]["status"] == "waiting"
    assert ran("refund") == [] and ran("lookup") == []


def test_an_operator_key_sees_and_does_everything(sqlite_stack: Stack) -> None:
    alice, operator = sqlite_stack.client("alice"), sqlite_stack.client("bob:operator")
    session_id, request_id = parked(sqlite_stack, alice)
    other, _ = parked(sqlite_stack, alice)

    assert ids(operator, "/api/sessions", "sessions") == [other, session_id]
    assert len(ids(operator, "/api/requests", "requests")) == 2
    assert operator.get(f"/api/sessions/{session_id}").status_code == 200
    assert operator.get(f"/api/sessions/{session_id}/events").status_code == 200
    assert operator.get(f"/api/requests/{request_id}").status_code == 200
    answered = operator.patch(f"/api/requests/{request_id}", json={"optionId": "approve"})
    assert answered.status_code == 200
    assert answered.get_json()["responder"] == {"authenticator": "operator", "issuer": "hitl",
                                                "principalType": "user", "principalId": "bob", "attributes": {}}
    assert operator.post(f"/api/sessions/{other}/cancel").status_code == 202  # anyone's turn, as an operator
    sqlite_stack.wait_idle()
    assert [r["responder"] for r in ran("refund")] == ["bob"]


def test_a_user_sees_the_requests_it_already_responded_to_but_not_their_session(sqlite_stack: Stack) -> None:
    """bob's principal responded to alice's request (through the engine, as an approver named on a request will):
    he is asked it, so he sees it, and only it."""
    alice, bob = sqlite_stack.client("alice"), sqlite_stack.client("bob")
    session_id, request_id = parked(sqlite_stack, alice)
    _, untouched = parked(sqlite_stack, alice)
    assert sqlite_stack.answer(request_id, "approve", who="bob").status == "refused"

    assert ids(bob, "/api/requests", "requests") == [request_id]
    assert bob.get(f"/api/requests/{request_id}").get_json()["status"] == "pending"
    expect_error(bob.get(f"/api/requests/{untouched}"), 404, "not_found")
    expect_error(bob.get(f"/api/sessions/{session_id}"), 404, "not_found")
    assert ids(bob, "/api/sessions", "sessions") == []


def test_each_user_lists_only_their_own_in_keyset_pages(stack: Stack) -> None:
    """Interleaved sessions of two users: each pages through theirs alone, newest (sessions) or oldest
    (requests) first; the filter is SQL, so a page is full whatever the other user has."""
    alice, bob = stack.client("alice"), stack.client("bob")
    mine: list[str] = []
    asked: list[str] = []
    for _ in range(3):
        session_id, request_id = parked(stack, alice)
        mine.append(session_id)
        asked.append(request_id)
        parked(stack, bob)
    mine.reverse()  # newest first

    assert ids(alice, "/api/sessions", "sessions", limit="2") == mine[:2]
    assert ids(alice, "/api/sessions", "sessions", limit="2", before=mine[1]) == mine[2:]
    assert alice.get("/api/sessions", query_string={"limit": "2", "before": mine[1]}).get_json()["next"] is None
    assert ids(alice, "/api/requests", "requests", limit="2") == asked[:2]
    assert ids(alice, "/api/requests", "requests", limit="2", after=asked[1]) == asked[2:]
    assert len(ids(bob, "/api/sessions", "sessions")) == len(ids(bob, "/api/requests", "requests")) == 3
    assert not set(ids(bob, "/api/sessions", "sessions")) & set(mine)
    assert alice.get("/api/inbox/events").get_json() == {"requestIds": asked, "next": None}  # the badge's page
    assert not set(bob.get("/api/inbox/events").get_json()["requestIds"]) & set(asked)


def test_an_agent_key_creates_sessions_sees_them_and_never_answers(sqlite_stack: Stack) -> None:
    """An agent that runs elsewhere: it starts sessions and reads them; a person answers their requests."""
    bot, alice, operator = (sqlite_stack.client(who) for who in ("bot:agent", "alice", "bob:operator"))
    session_id, request_id = parked(sqlite_stack, bot)
    before = event_count(bot, session_id)

    assert ids(bot, "/api/sessions", "sessions") == [session_id]
    assert ids(bot, "/api/requests", "requests") == [request_id]
    assert bot.get(f"/api/sessions/{session_id}").get_json()["initiator"]["principalType"] == "agent"
    error = expect_error(bot.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}), 403, "not_permitted")
    assert error["message"] == "an agent does not answer requests; a person does"
    expect_error(bot.post(f"/api/sessions/{session_id}/input",
                          json={"inputResponses": [{"requestId": request_id, "optionId": "approve"}]}),
                 403, "not_permitted")
    expect_error(alice.get(f"/api/sessions/{session_id}"), 404, "not_found")  # another's, to a user
    sqlite_stack.wait_idle()
    assert event_count(bot, session_id) == before  # no candidate stored

    typed = bot.post(f"/api/sessions/{session_id}/input", json={"message": "approve"})  # not an answer: it steers

    assert typed.status_code == 202 and typed.get_json()["effect"] == "steered"
    sqlite_stack.wait_idle()
    assert operator.get(f"/api/requests/{request_id}").get_json()["outcome"] == "ignored"
    assert ran("refund") == []


@pytest.mark.parametrize(("who", "principal", "role"), [
    ("alice", {"authenticator": "api-key", "principalType": "user", "principalId": "alice"}, "user"),
    ("bob:operator", {"authenticator": "operator", "principalType": "user", "principalId": "bob"}, "operator"),
    ("bot:agent", {"authenticator": "api-key", "principalType": "agent", "principalId": "bot"}, "agent"),
])
def test_me_says_who_the_key_acts_as(sqlite_stack: Stack, who: str, principal: dict[str, str], role: str) -> None:
    response = sqlite_stack.client(who).get("/api/me")

    assert response.status_code == 200
    assert response.get_json() == {"principal": {**principal, "issuer": "hitl", "attributes": {}}, "role": role}


def test_metrics_are_for_operators(sqlite_stack: Stack) -> None:
    for who in ("alice", "bot:agent"):
        error = expect_error(sqlite_stack.client(who).get("/metrics"), 403, "not_permitted")
        assert "operator" in error["message"]
    assert sqlite_stack.client("bob:operator").get("/metrics").status_code == 200


@pytest.mark.parametrize("path", ["/api/sessions", "/api/requests"])
def test_a_limit_above_500_is_a_400_naming_it(sqlite_stack: Stack, path: str) -> None:
    client = sqlite_stack.client("alice")
    created(client, REFUND)

    for limit in ("501", "2147483647"):
        error = expect_error(client.get(path, query_string={"limit": limit}), 400, "invalid_query")
        assert error["message"] == "`limit` must be an integer from 0 to 500"
        assert error["details"] == {"parameter": "limit"}
    assert client.get(path, query_string={"limit": "500"}).status_code == 200
