"""The REST API (`/api`) and `/healthz`, through Flask's test client.

Flows that run turns go through the `stack` fixture (SQLite + in-process jobs, and PostgreSQL + Redis + a
real `hitl worker`); validation and authentication do not depend on the stack and run on SQLite only.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import select
from werkzeug.test import TestResponse

from engine.store.events import emit
from engine.store.storage import new_id
from engine.store.tables import Event
from gateway.app import create_app
from gateway.body_limit import MAX_BODY_BYTES
from gateway.settings import Settings
from tests.conftest import API_KEYS, KEYS, TEST_AGENT, Stack, sqlite_settings
from tests.support.agent import read_ledger, script

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])
LOOKUP = script([("lookup", {"order_id": "o-1"})], final="looked up")
ASK = script([("ask_question", {"question": "Your name?"})])


def ran(tool: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool]


def expect_error(response: TestResponse, status: int, code: str) -> dict[str, Any]:
    """The response is `{error: {code, message, ...}}` with this HTTP status; returns the error."""
    assert response.status_code == status, response.get_data(as_text=True)
    error: dict[str, Any] = response.get_json()["error"]
    assert error["code"] == code, error
    assert isinstance(error["message"], str) and error["message"]
    return error


def created(client: FlaskClient, message: str | None = None) -> dict[str, Any]:
    body = {} if message is None else {"message": message}
    response = client.post("/api/sessions", json=body)
    assert response.status_code == 201, response.get_data(as_text=True)
    data: dict[str, Any] = response.get_json()
    return data


def pending_ids(client: FlaskClient, session_id: str) -> list[str]:
    response = client.get("/api/requests", query_string={"status": "pending", "sessionId": session_id})
    assert response.status_code == 200
    return [r["requestId"] for r in response.get_json()["requests"]]


def event_count(client: FlaskClient, session_id: str) -> int:
    return len(client.get(f"/api/sessions/{session_id}/events").get_json()["events"])


def bare(request: dict[str, Any]) -> dict[str, Any]:
    """A request as GET /api/requests/<id> gives it, without what it tells of its session and its reminders and
    escalation as asked for (events do not)."""
    return {key: value for key, value in request.items()
            if key not in ("title", "agent", "channel", "remind", "escalate")}


def parked(stack: Stack, client: FlaskClient, message: str = REFUND) -> tuple[str, str]:
    """A session (created through the API) whose first turn waits on exactly one request."""
    session_id = created(client, message)["id"]
    stack.wait_idle()
    [request_id] = pending_ids(client, session_id)
    return session_id, request_id


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


@pytest.fixture
def open_stack(tmp_path: Path) -> Iterator[Stack]:
    """No HITL_API_KEYS: loopback clients are the local operator, everyone else is turned away."""
    built = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'open.db'}", agent=TEST_AGENT,
                                     api_keys={}))
    yield built
    built.close()


# -- sessions -----------------------------------------------------------------------------------------


def test_a_new_session_with_a_message_runs_its_first_turn(stack: Stack) -> None:
    client = stack.client("alice")

    data = created(client, LOOKUP)

    assert set(data) == {"id", "turnId"}
    stack.wait_idle()
    history = client.get(f"/api/sessions/{data['id']}").get_json()
    assert history["id"] == data["id"]
    assert history["channel"] == "api"
    assert history["initiator"]["principalId"] == "alice"
    [turn] = history["turns"]
    assert turn["id"] == data["turnId"] and turn["seq"] == 1
    assert turn["status"] == "completed"
    assert turn["requestedBy"]["principalId"] == "alice"
    assert [(r["seq"], r["status"]) for r in turn["runs"]] == [(1, "succeeded")]
    assert turn["result"].startswith("looked up | ")
    assert [m["role"] for m in turn["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert [e["order_id"] for e in ran("lookup")] == ["o-1"]


def test_a_new_session_without_a_message_is_idle(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")

    data = created(client)

    assert set(data) == {"id"}
    history = client.get(f"/api/sessions/{data['id']}").get_json()
    assert history["turns"] == []
    assert history["status"] == "idle"


@pytest.mark.parametrize(("body", "code", "field"), [
    ({"message": "hi", "bogus": 1}, "invalid_body", "bogus"),
    ({"text": "hi"}, "invalid_body", "text"),
    ({"message": ""}, "invalid_body", "message"),
    ({"message": 42}, "invalid_body", "message"),
    ([{"message": "hi"}], "invalid_json", None),
    ("hi", "invalid_json", None),
    (None, "invalid_json", None),
])
def test_a_bad_new_session_body_is_a_400_and_creates_nothing(
    sqlite_stack: Stack, body: Any, code: str, field: str | None
) -> None:
    client = sqlite_stack.client("alice")

    if body is None:
        response = client.post("/api/sessions", data="{not json", content_type="application/json")
    else:
        response = client.post("/api/sessions", json=body)

    error = expect_error(response, 400, code)
    if field is not None:  # the field alone, as the client sent it
        assert [d["field"] for d in error["details"]] == [field]
    assert client.get("/api/sessions").get_json()["sessions"] == []


@pytest.mark.parametrize(("body", "status", "code"), [
    pytest.param("[" * 100_000 + "]" * 100_000, 400, "invalid_json", id="deeper-than-the-json-parser-goes"),
    pytest.param('{"message": "hi", "x": ' + "[" * 900 + "]" * 900 + "}", 400, "invalid_body",
                 id="deep-under-an-unknown-key"),
    pytest.param('{"message": "hi", "channel": "slack", "address": ' + '{"a": ' * 900 + "1" + "}" * 901,
                 422, "unknown_channel", id="deep-address"),
])
def test_a_deeply_nested_body_is_a_4xx_and_creates_nothing(sqlite_stack: Stack, body: str, status: int,
                                                           code: str) -> None:
    client = sqlite_stack.client("alice")

    expect_error(client.post("/api/sessions", data=body, content_type="application/json"), status, code)

    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_a_body_over_the_limit_is_a_413_and_changes_nothing(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client, ASK)
    before = event_count(client, session_id)
    huge = "x" * MAX_BODY_BYTES

    for response in (client.post("/api/sessions", json={"message": huge}),
                     client.post(f"/api/sessions/{session_id}/input", json={"message": huge}),
                     client.patch(f"/api/requests/{request_id}", json={"text": huge})):
        error = expect_error(response, 413, "body_too_large")
        assert error["details"] == {"maxBytes": MAX_BODY_BYTES}

    assert [s["id"] for s in client.get("/api/sessions").get_json()["sessions"]] == [session_id]
    assert pending_ids(client, session_id) == [request_id]
    assert event_count(client, session_id) == before
    just_under = client.patch(f"/api/requests/{request_id}", json={"text": "x" * (MAX_BODY_BYTES - 20)})
    assert just_under.status_code == 200, just_under.get_data(as_text=True)


def test_a_blank_message_creates_nothing(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    response = client.post("/api/sessions", json={"message": "   "})
    assert 400 <= response.status_code < 500
    assert response.get_json()["error"]["code"]
    assert client.get("/api/sessions").get_json()["sessions"] == []


def test_sessions_are_listed_newest_first_with_their_open_requests(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    waiting, _ = parked(sqlite_stack, client)
    done = created(client, LOOKUP)["id"]
    empty = created(client)["id"]
    sqlite_stack.wait_idle()

    sessions = client.get("/api/sessions").get_json()["sessions"]

    assert [s["id"] for s in sessions] == [empty, done, waiting]
    assert [s["pendingRequests"] for s in sessions] == [0, 0, 1]
    assert {s["channel"] for s in sessions} == {"api"}


def test_sessions_come_in_pages_newest_first(stack: Stack) -> None:
    client = stack.client("alice")
    opened = [created(client)["id"] for _ in range(5)][::-1]  # newest first
    waiting, _ = parked(stack, client)

    def page(**query: str) -> dict[str, Any]:
        response = client.get("/api/sessions", query_string=query)
        assert response.status_code == 200, response.get_data(as_text=True)
        data: dict[str, Any] = response.get_json()
        return {"ids": [s["id"] for s in data["sessions"]], "next": data["next"],
                "pending": [s["pendingRequests"] for s in data["sessions"]]}

    assert page(limit="2") == {"ids": [waiting, opened[0]], "next": opened[0], "pending": [1, 0]}
    assert page(limit="2", before=opened[0]) == {"ids": opened[1:3], "next": opened[2], "pending": [0, 0]}
    assert page(limit="2", before=opened[2]) == {"ids": opened[3:], "next": None, "pending": [0, 0]}
    assert page()["next"] is None and len(page()["ids"]) == 6

    error = expect_error(client.get("/api/sessions", query_string={"before": "ses_nope"}), 400, "invalid_query")
    assert error["details"] == {"parameter": "before"}


# -- session input ------------------------------------------------------------------------------------


def test_a_message_to_a_session_starts_a_turn(stack: Stack) -> None:
    client = stack.client("alice")
    session_id = created(client)["id"]

    response = client.post(f"/api/sessions/{session_id}/input", json={"message": LOOKUP})

    assert response.status_code == 202
    turn_id = response.get_json()["turnId"]
    stack.wait_idle()
    [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
    assert turn["id"] == turn_id
    assert turn["status"] == "completed"
    assert len(ran("lookup")) == 1


def test_input_responses_settle_requests_and_the_turn_resumes(stack: Stack) -> None:
    client = stack.client("alice")
    session_id, request_id = parked(stack, client)
    assert ran("refund") == []

    response = client.post(f"/api/sessions/{session_id}/input",
                           json={"inputResponses": [{"requestId": request_id, "optionId": "approve"}]})

    assert response.status_code == 202
    [result] = response.get_json()["results"]
    assert result["requestId"] == request_id
    assert result["status"] == "settled" and result["reason"] is None
    assert result["request"]["status"] == "resolved" and result["request"]["outcome"] == "approved"
    assert result["request"]["responder"]["principalId"] == "alice"
    stack.wait_idle()
    [refund] = ran("refund")
    assert refund["responder"] == "alice"
    [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
    assert turn["status"] == "completed"
    assert pending_ids(client, session_id) == []


def test_a_refused_input_response_is_reported_and_the_request_stays_open(sqlite_stack: Stack) -> None:
    alice = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, alice, script([("payout", {"amount": 10})]))

    response = alice.post(f"/api/sessions/{session_id}/input",
                          json={"inputResponses": [{"requestId": request_id, "optionId": "approve"}]})

    assert response.status_code == 202
    [result] = response.get_json()["results"]
    assert result["status"] == "refused"
    assert result["reason"] == "only bob may approve payouts"
    assert result["request"]["status"] == "pending"
    sqlite_stack.wait_idle()
    assert pending_ids(alice, session_id) == [request_id]
    assert ran("payout") == []


@pytest.mark.parametrize(("body", "details"), [
    ({"inputResponses": [{"requestId": 5, "optionId": "approve"}]},
     [{"field": "inputResponses.0.requestId", "problem": "Input should be a valid string"}]),
    ({"message": "hi", "turnPolicy": "later"},
     [{"field": "turnPolicy", "problem": "Input should be 'steer' or 'queue'"}]),
    ({"inputResponses": []},
     [{"field": "inputResponses", "problem": "List should have at least 1 item after validation, not 0"}]),
])
def test_a_body_error_names_the_field_as_sent(sqlite_stack: Stack, body: dict[str, Any],
                                              details: list[dict[str, str]]) -> None:
    """Not the branches of an optional field's type (`inputResponses.list[InputResponse].0.requestId` beside
    `inputResponses.none`)."""
    client = sqlite_stack.client("alice")
    session_id, _ = parked(sqlite_stack, client)

    response = client.post(f"/api/sessions/{session_id}/input", json=body)

    assert expect_error(response, 400, "invalid_body")["details"] == details


@pytest.mark.parametrize("body", [
    pytest.param({}, id="neither"),
    pytest.param({"message": "hi", "inputResponses": [{"requestId": "REQ", "optionId": "approve"}]}, id="both"),
    pytest.param({"message": ""}, id="empty-message"),
    pytest.param({"inputResponses": []}, id="no-responses"),
    pytest.param({"inputResponses": [{"requestId": "REQ", "optionId": "approve", "bogus": 1}]}, id="unknown-key"),
    pytest.param({"inputResponses": [{"optionId": "approve"}]}, id="no-request-id"),
    pytest.param({"inputResponses": [{"requestId": "REQ", "option_id": "approve", "choice": "x"}]},
                 id="unknown-key-2"),
    pytest.param({"note": "hi"}, id="unknown-top-level-key"),
    pytest.param(["REQ"], id="not-an-object"),
])
def test_a_bad_session_input_is_a_400_and_changes_nothing(sqlite_stack: Stack, body: Any) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client)
    before = event_count(client, session_id)

    def fill(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fill(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fill(v) for v in value]
        return request_id if value == "REQ" else value

    response = client.post(f"/api/sessions/{session_id}/input", json=fill(body))

    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] in ("invalid_body", "invalid_json")
    sqlite_stack.wait_idle()
    assert pending_ids(client, session_id) == [request_id]
    assert event_count(client, session_id) == before
    assert len(client.get(f"/api/sessions/{session_id}").get_json()["turns"]) == 1


def test_session_input_errors(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client)
    other_id, other_request = parked(sqlite_stack, client)
    before = event_count(client, session_id)

    def send(sid: str, *responses: dict[str, Any]) -> TestResponse:
        return client.post(f"/api/sessions/{sid}/input", json={"inputResponses": list(responses)})

    expect_error(client.post("/api/sessions/ses_nope/input", json={"message": "hi"}), 404, "not_found")
    expect_error(send(session_id, {"requestId": other_request, "optionId": "approve"}), 404, "not_found")
    expect_error(send(session_id, {"requestId": "req_nope", "optionId": "approve"}), 404, "not_found")
    error = expect_error(send(session_id, {"requestId": request_id, "optionId": "maybe"}), 422, "invalid_input")
    assert error["details"]["options"] == ["approve", "deny"]
    # all or nothing: a bad second response keeps the good first one from settling
    expect_error(send(session_id, {"requestId": request_id, "optionId": "approve"},
                      {"requestId": other_request, "optionId": "approve"}), 404, "not_found")

    sqlite_stack.wait_idle()
    assert pending_ids(client, session_id) == [request_id]
    assert pending_ids(client, other_id) == [other_request]
    assert event_count(client, session_id) == before
    assert ran("refund") == []

    assert send(session_id, {"requestId": request_id, "optionId": "approve"}).status_code == 202
    sqlite_stack.wait_idle()
    after = event_count(client, session_id)
    expect_error(send(session_id, {"requestId": request_id, "optionId": "cancel"}), 409, "request_closed")
    sqlite_stack.wait_idle()
    assert event_count(client, session_id) == after
    assert len(ran("refund")) == 1


# -- history and events -------------------------------------------------------------------------------


def test_history_holds_turns_runs_requests_with_candidates_and_messages(stack: Stack) -> None:
    alice = stack.client("alice")
    session_id, request_id = parked(stack, alice)
    assert stack.answer(request_id, "approve", who="bob").status == "refused"  # through the engine
    assert alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 200
    stack.wait_idle()
    assert created(alice, LOOKUP)  # another session: not part of this history
    assert alice.post(f"/api/sessions/{session_id}/input", json={"message": LOOKUP}).status_code == 202
    stack.wait_idle()

    history = alice.get(f"/api/sessions/{session_id}").get_json()

    assert history["id"] == session_id
    assert history["status"] == "idle"
    assert history["channel"] == "api"
    first, second = history["turns"]
    assert [t["seq"] for t in history["turns"]] == [1, 2]
    assert [t["status"] for t in history["turns"]] == ["completed", "completed"]
    assert [(r["seq"], r["status"]) for r in first["runs"]] == [(1, "interrupted"), (2, "succeeded")]
    assert [(r["seq"], r["status"]) for r in second["runs"]] == [(1, "succeeded")]
    [request] = first["requests"]
    assert request["requestId"] == request_id
    assert (request["status"], request["outcome"]) == ("resolved", "approved")
    assert [(c["responder"]["principalId"], c["decision"], c["outcome"]) for c in request["candidates"]] == [
        ("bob", "approve", "rejected"), ("alice", "approve", "allowed")]
    assert "only alice may answer" in request["candidates"][0]["reason"]
    assert second["requests"] == []
    assert [m["role"] for m in first["messages"]] == ["user", "assistant", "tool", "assistant"]
    assert first["messages"][0]["content"] == REFUND
    assert second["messages"][0]["content"] == LOOKUP
    [call] = first["toolCalls"]
    assert (call["toolName"], call["status"], call["approvalRequestId"]) == ("refund", "completed", request_id)


def test_an_unknown_session_or_request_is_a_404(stack: Stack) -> None:
    """Whatever the id looks like: one of ours that does not exist, or any other string (PostgreSQL stores
    the two kinds differently)."""
    client = stack.client("alice")
    for session_id in ("ses_nope", new_id("ses"), new_id("ses").upper(), "turn_" + new_id("ses")[4:], "é"):
        expect_error(client.get(f"/api/sessions/{session_id}"), 404, "not_found")
        expect_error(client.get(f"/api/sessions/{session_id}/events"), 404, "not_found")
    for request_id in ("req_nope", new_id("req"), f"limit-{new_id('turn')}-1"):
        expect_error(client.get(f"/api/requests/{request_id}"), 404, "not_found")


def test_events_are_dense_ordered_and_read_after_a_cursor(stack: Stack) -> None:
    client = stack.client("alice")
    session_id, request_id = parked(stack, client)
    parked_events = client.get(f"/api/sessions/{session_id}/events").get_json()["events"]
    assert [e["type"] for e in parked_events][-2:] == ["input.requested", "turn.waiting"]
    assert parked_events[-2]["data"] == {"requests": [bare(client.get(f"/api/requests/{request_id}").get_json())]}
    cursor = parked_events[-1]["seq"]
    assert client.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 200
    stack.wait_idle()

    events = client.get(f"/api/sessions/{session_id}/events").get_json()["events"]

    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[:len(parked_events)] == parked_events
    assert all(e["turnId"] == parked_events[0]["turnId"] for e in events if e["type"] != "session.waiting")
    newer = client.get(f"/api/sessions/{session_id}/events", query_string={"after": cursor}).get_json()["events"]
    assert newer == events[cursor:]
    assert [e["type"] for e in newer] == [
        "approval.candidate", "approval.settled", "input.resolved", "turn.started", "action.called",
        "action.result", "assistant.message", "turn.completed", "session.waiting",
    ]
    assert newer[0]["data"]["requestId"] == request_id
    last = events[-1]["seq"]
    assert client.get(f"/api/sessions/{session_id}/events?after={last}").get_json()["events"] == []


def test_an_input_requested_event_keeps_showing_its_requests_as_they_opened(sqlite_stack: Stack) -> None:
    """The event row stores the requests' ids only; the wire shows each as it was when it opened, also once
    it is answered. An event stored with its requests inline (before they were stored by id) shows as stored."""
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client)
    opened = bare(client.get(f"/api/requests/{request_id}").get_json())
    with sqlite_stack.rt.db.read() as db:
        stored = db.execute(select(Event.data).where(Event.session_id == session_id,
                                                     Event.type == "input.requested")).scalar_one()
    assert stored == {"requestIds": [request_id]}
    assert client.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 200
    sqlite_stack.wait_idle()
    assert client.get(f"/api/requests/{request_id}").get_json()["status"] == "resolved"
    inline = {"requests": [{**opened, "prompt": "as stored"}]}
    with sqlite_stack.rt.transaction() as db:
        emit(db, session_id, "input.requested", inline, turn_id=opened["turnId"], at=sqlite_stack.rt.now())

    events = client.get(f"/api/sessions/{session_id}/events").get_json()["events"]

    assert [e["data"] for e in events if e["type"] == "input.requested"] == [{"requests": [opened]}, inline]


@pytest.mark.parametrize("after", ["abc", "-1", "1.5", ""])
def test_a_bad_event_cursor_is_a_400(sqlite_stack: Stack, after: str) -> None:
    client = sqlite_stack.client("alice")
    session_id = created(client)["id"]
    error = expect_error(client.get(f"/api/sessions/{session_id}/events?after={after}"), 400, "invalid_query")
    assert error["details"] == {"parameter": "after"}


# -- the request inbox --------------------------------------------------------------------------------


def test_the_request_inbox_comes_in_pages_oldest_first(stack: Stack) -> None:
    """A page of `limit` (100 unless asked) and the cursor to the next: an inbox of 100k parked turns is not one
    answer. The cursor orders by time, then number, then id, on both databases (ids are packed on PostgreSQL)."""
    client = stack.client("alice")
    opened = [parked(stack, client)[1] for _ in range(5)]

    def page(**query: str) -> dict[str, Any]:
        response = client.get("/api/requests", query_string={"status": "pending", **query})
        assert response.status_code == 200, response.get_data(as_text=True)
        data: dict[str, Any] = response.get_json()
        return {"ids": [r["requestId"] for r in data["requests"]], "next": data["next"]}

    assert page() == {"ids": opened, "next": None}
    first = page(limit="2")
    assert first == {"ids": opened[:2], "next": opened[1]}
    second = page(limit="2", after=first["next"])
    assert second == {"ids": opened[2:4], "next": opened[3]}
    assert page(limit="2", after=second["next"]) == {"ids": opened[4:], "next": None}
    assert page(limit="5") == {"ids": opened, "next": None}  # exactly full: nothing follows
    assert page(limit="0") == {"ids": [], "next": None}

    error = expect_error(client.get("/api/requests", query_string={"after": "req_nope"}), 400, "invalid_query")
    assert error["details"] == {"parameter": "after"}
    error = expect_error(client.get("/api/requests", query_string={"limit": "-1"}), 400, "invalid_query")
    assert error["details"] == {"parameter": "limit"}


def test_the_request_inbox(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    first_session, first = parked(sqlite_stack, client)
    second_session, second = parked(sqlite_stack, client, script([("payout", {"amount": 5})]))
    third_session, third = parked(sqlite_stack, client)
    assert client.patch(f"/api/requests/{third}", json={"optionId": "cancel"}).status_code == 200
    sqlite_stack.wait_idle()

    def inbox(**query: str) -> list[str]:
        response = client.get("/api/requests", query_string=query)
        assert response.status_code == 200
        return [r["requestId"] for r in response.get_json()["requests"]]

    assert inbox() == [first, second, third]
    assert inbox(status="pending") == [first, second]
    assert inbox(status="resolved") == [third]
    assert inbox(sessionId=second_session) == [second]
    assert inbox(status="pending", sessionId=third_session) == []
    assert inbox(status="resolved", sessionId=third_session) == [third]
    assert inbox(sessionId="ses_nope") == []

    one = client.get(f"/api/requests/{second}").get_json()
    assert one["requestId"] == second and one["sessionId"] == second_session
    assert one["kind"] == "tool-approval" and one["status"] == "pending"
    assert one["action"]["toolName"] == "payout" and one["action"]["input"] == {"amount": 5}
    assert [o["id"] for o in one["options"]] == ["approve", "deny"]
    assert client.get(f"/api/requests/{third}").get_json()["outcome"] == "denied"

    expect_error(client.get("/api/requests/req_nope"), 404, "not_found")
    error = expect_error(client.get("/api/requests?status=bogus"), 400, "invalid_query")
    assert error["details"] == {"parameter": "status"}


# -- PATCH /api/requests/<id> -------------------------------------------------------------------------


def test_approve_settles_the_request_and_the_turn_runs_the_tool_once(stack: Stack) -> None:
    client = stack.client("alice")
    session_id, request_id = parked(stack, client)

    response = client.patch(f"/api/requests/{request_id}", json={"optionId": "approve"})

    assert response.status_code == 200
    request = response.get_json()
    assert request["requestId"] == request_id
    assert (request["status"], request["outcome"]) == ("resolved", "approved")
    assert request["responder"]["principalId"] == "alice"
    assert request["response"] == {"optionId": "approve", "text": None}
    stack.wait_idle()
    [refund] = ran("refund")
    assert (refund["charge_id"], refund["requester"], refund["responder"]) == ("ch_1", "alice", "alice")
    [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
    assert turn["status"] == "completed"
    assert '"refunded": 20.0' in turn["result"]

    events = event_count(client, session_id)
    error = expect_error(client.patch(f"/api/requests/{request_id}", json={"optionId": "cancel"}),
                         409, "request_closed")
    assert "no longer open" in error["message"]
    stack.wait_idle()
    assert event_count(client, session_id) == events
    assert len(ran("refund")) == 1
    assert client.get(f"/api/requests/{request_id}").get_json()["outcome"] == "approved"


def test_deny_with_a_note_never_runs_the_tool(stack: Stack) -> None:
    client = stack.client("alice")
    session_id, request_id = parked(stack, client)

    response = client.patch(f"/api/requests/{request_id}", json={"optionId": "deny", "text": "too much"})

    assert response.status_code == 200
    request = response.get_json()
    assert (request["status"], request["outcome"]) == ("resolved", "denied")
    assert request["response"] == {"optionId": "deny", "text": "too much"}
    assert [(o["id"], o["label"]) for o in request["options"]] == [("approve", "Approve"), ("deny", "Deny")]
    stack.wait_idle()
    assert ran("refund") == []
    [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
    assert turn["status"] == "completed"
    assert "Denied by alice: too much" in turn["result"]


def test_the_old_cancel_id_still_denies_with_its_note(sqlite_stack: Stack) -> None:
    """Clients written while the refusal was `cancel` keep working: PATCH and inputResponses alike."""
    client = sqlite_stack.client("alice")
    _, patched = parked(sqlite_stack, client)
    session_id, posted = parked(sqlite_stack, client)

    response = client.patch(f"/api/requests/{patched}", json={"optionId": "Cancel", "text": "not this one"})
    assert response.status_code == 200, response.get_json()
    assert (response.get_json()["outcome"], response.get_json()["response"]) == (
        "denied", {"optionId": "deny", "text": "not this one"})
    answer = {"requestId": posted, "optionId": "cancel"}
    assert client.post(f"/api/sessions/{session_id}/input", json={"inputResponses": [answer]}).status_code == 202
    sqlite_stack.wait_idle()
    assert client.get(f"/api/requests/{posted}").get_json()["outcome"] == "denied"
    assert ran("refund") == []


def test_a_refused_responder_gets_a_403_and_the_request_stays_open(stack: Stack) -> None:
    """bob is asked a request of alice's session once he responded to it (through the engine, as an approver named
    on a request will): his answer through the API is then the response policy's to refuse."""
    alice, bob = stack.client("alice"), stack.client("bob")
    session_id, request_id = parked(stack, alice)
    assert stack.answer(request_id, "approve", who="bob").status == "refused"

    error = expect_error(bob.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}),
                         403, "response_refused")

    assert "only alice may answer" in error["message"]
    assert error["details"] == {"requestId": request_id}
    stack.wait_idle()
    assert pending_ids(alice, session_id) == [request_id]
    assert ran("refund") == []
    assert alice.get(f"/api/sessions/{session_id}").get_json()["turns"][0]["status"] == "waiting"

    assert alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 200
    stack.wait_idle()
    assert len(ran("refund")) == 1


def test_a_tool_response_policy_decides_who_may_answer(sqlite_stack: Stack) -> None:
    alice, bob = sqlite_stack.client("alice"), sqlite_stack.client("bob:operator")
    _, request_id = parked(sqlite_stack, alice, script([("payout", {"amount": 10})]))

    error = expect_error(alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}),
                         403, "response_refused")
    assert error["message"] == "only bob may approve payouts"

    assert bob.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 200
    sqlite_stack.wait_idle()
    [payout] = ran("payout")
    assert (payout["requester"], payout["responder"]) == ("alice", "bob")


def test_a_response_policy_that_waits_answers_202(stack: Stack) -> None:
    alice, bob = stack.client("alice"), stack.client("bob:operator")
    session_id, request_id = parked(stack, alice, script([("wire_transfer", {"amount": 1000})]))

    first = alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"})

    assert first.status_code == 202
    assert first.get_json()["requestId"] == request_id
    assert first.get_json()["status"] == "pending"
    stack.wait_idle()
    assert pending_ids(alice, session_id) == [request_id]
    assert ran("wire_transfer") == []

    second = bob.patch(f"/api/requests/{request_id}", json={"optionId": "approve"})

    assert second.status_code == 200
    assert (second.get_json()["status"], second.get_json()["outcome"]) == ("resolved", "approved")
    assert second.get_json()["responder"]["principalId"] == "bob"
    stack.wait_idle()
    assert len(ran("wire_transfer")) == 1
    assert alice.get(f"/api/sessions/{session_id}").get_json()["turns"][0]["status"] == "completed"


@pytest.mark.parametrize(("body", "status", "code"), [
    pytest.param({"optionId": "maybe"}, 422, "invalid_input", id="unknown-option"),
    pytest.param({"optionId": "approve", "text": "sure"}, 422, "invalid_input", id="text-on-approve"),
    pytest.param({}, 422, "invalid_input", id="no-option"),
    pytest.param({"text": "yes please"}, 422, "invalid_input", id="text-only"),
    pytest.param({"optionId": "approve", "bogus": 1}, 400, "invalid_body", id="unknown-key"),
    pytest.param({"requestId": "REQ", "optionId": "approve"}, 400, "invalid_body", id="request-id-in-body"),
    pytest.param({"optionId": 1}, 400, "invalid_body", id="option-not-a-string"),
    pytest.param(["approve"], 400, "invalid_json", id="not-an-object"),
    pytest.param("approve", 400, "invalid_json", id="a-string"),
])
def test_a_bad_answer_changes_nothing(sqlite_stack: Stack, body: Any, status: int, code: str) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client)
    before = event_count(client, session_id)
    if isinstance(body, dict) and body.get("requestId") == "REQ":
        body = body | {"requestId": request_id}

    expect_error(client.patch(f"/api/requests/{request_id}", json=body), status, code)

    sqlite_stack.wait_idle()
    assert pending_ids(client, session_id) == [request_id]
    assert event_count(client, session_id) == before
    assert ran("refund") == []


def test_a_non_json_answer_and_an_unknown_request(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client)
    before = event_count(client, session_id)

    error = expect_error(client.patch(f"/api/requests/{request_id}", data="approve", content_type="text/plain"),
                         415, "unsupported_media_type")
    assert error["details"] == {"contentType": "text/plain"}
    json_as_a_form = client.patch(f"/api/requests/{request_id}", data='{"optionId": "approve"}',
                                  content_type="application/x-www-form-urlencoded")  # what curl -d sends
    assert "Content-Type: application/json" in expect_error(json_as_a_form, 415, "unsupported_media_type")["message"]
    expect_error(client.patch(f"/api/requests/{request_id}", data="{", content_type="application/json"),
                 400, "invalid_json")
    error = expect_error(client.patch("/api/requests/req_nope", json={"optionId": "approve"}), 404, "not_found")
    assert error["details"] == {"requestId": "req_nope"}

    sqlite_stack.wait_idle()
    assert pending_ids(client, session_id) == [request_id]
    assert event_count(client, session_id) == before


# -- authentication -----------------------------------------------------------------------------------

Route = Callable[[str, str], tuple[str, str, Any]]
ROUTES: dict[str, Route] = {
    "list-sessions": lambda sid, rid: ("GET", "/api/sessions", None),
    "new-session": lambda sid, rid: ("POST", "/api/sessions", {"message": LOOKUP}),
    "history": lambda sid, rid: ("GET", f"/api/sessions/{sid}", None),
    "events": lambda sid, rid: ("GET", f"/api/sessions/{sid}/events", None),
    "input": lambda sid, rid: ("POST", f"/api/sessions/{sid}/input",
                               {"inputResponses": [{"requestId": rid, "optionId": "approve"}]}),
    "message": lambda sid, rid: ("POST", f"/api/sessions/{sid}/input", {"message": LOOKUP}),
    "inbox": lambda sid, rid: ("GET", "/api/requests", None),
    "pending-inbox": lambda sid, rid: ("GET", "/api/inbox/events", None),
    "request": lambda sid, rid: ("GET", f"/api/requests/{rid}", None),
    "answer": lambda sid, rid: ("PATCH", f"/api/requests/{rid}", {"optionId": "approve"}),
}


def call(client: FlaskClient, route: Route, session_id: str, request_id: str, **kwargs: Any) -> TestResponse:
    method, path, body = route(session_id, request_id)
    return client.open(path, method=method, json=body, **kwargs)


@pytest.mark.parametrize("authorization", [
    pytest.param(None, id="missing"),
    pytest.param("Bearer wrong-key", id="wrong-key"),
    pytest.param("Bearer ", id="empty-key"),
    pytest.param(KEYS["alice"], id="no-scheme"),
    pytest.param(f"Basic {KEYS['alice']}", id="wrong-scheme"),
    pytest.param("Bearer alice", id="principal-not-key"),
])
def test_every_api_route_needs_a_valid_key(sqlite_stack: Stack, authorization: str | None) -> None:
    session_id, request_id = parked(sqlite_stack, sqlite_stack.client("alice"))
    alice = sqlite_stack.client("alice")
    before = event_count(alice, session_id)
    stranger = sqlite_stack.client(None)
    if authorization is not None:
        stranger.environ_base["HTTP_AUTHORIZATION"] = authorization

    for name, route in ROUTES.items():
        response = call(stranger, route, session_id, request_id)
        assert response.status_code == 401, name
        assert response.get_json()["error"]["code"] == "unauthorized", name

    sqlite_stack.wait_idle()
    assert pending_ids(alice, session_id) == [request_id]
    assert event_count(alice, session_id) == before
    assert len(alice.get("/api/sessions").get_json()["sessions"]) == 1
    assert read_ledger() == []


PUBLIC_API_RULES = {"/api/openapi.json"}  # the API's own description is not a secret


def test_no_api_rule_is_left_open(sqlite_stack: Stack) -> None:
    """Every rule under /api (including ones added after this test was written) answers 401 without a key."""
    session_id, request_id = parked(sqlite_stack, sqlite_stack.client("alice"))
    stranger = sqlite_stack.client(None)
    checked = []
    for rule in sqlite_stack.app.url_map.iter_rules():
        if not rule.rule.startswith("/api/") or rule.rule in PUBLIC_API_RULES:
            continue
        built = rule.build({"session_id": session_id, "request_id": request_id, "name": "alice"},
                           append_unknown=False)  # (`name`: a person's or a group's)
        assert built is not None, rule.rule
        path = built[1]
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"}):
            for accept in ("application/json", "text/event-stream"):
                response = stranger.open(path, method=method, json={}, headers={"Accept": accept})
                assert response.status_code == 401, (method, path, accept, response.status_code)
                checked.append((method, rule.rule))
    assert len(checked) >= 2 * len(ROUTES)
    assert pending_ids(sqlite_stack.client("alice"), session_id) == [request_id]


def test_every_api_route_serves_a_valid_key(sqlite_stack: Stack) -> None:
    """The control for the 401 test: the same calls with a key succeed (the scheme is case-insensitive)."""
    session_id, request_id = parked(sqlite_stack, sqlite_stack.client("alice"))
    client = sqlite_stack.client(None)
    client.environ_base["HTTP_AUTHORIZATION"] = f"bearer {KEYS['alice']}"

    statuses = {name: call(client, route, session_id, request_id).status_code for name, route in ROUTES.items()}

    assert statuses == {"list-sessions": 200, "new-session": 201, "history": 200, "events": 200, "message": 202,
                        "input": 202, "inbox": 200, "pending-inbox": 200, "request": 200, "answer": 409}


def test_without_keys_a_loopback_client_is_the_local_operator(open_stack: Stack) -> None:
    client = open_stack.client(None)
    assert "HTTP_AUTHORIZATION" not in client.environ_base

    session_id = created(client)["id"]

    assert client.get(f"/api/sessions/{session_id}").get_json()["initiator"] == {
        "authenticator": "operator", "issuer": "hitl", "principalType": "user", "principalId": "local",
        "attributes": {}}
    ipv6 = client.get("/api/sessions", environ_base={"REMOTE_ADDR": "::1"})
    assert ipv6.status_code == 200 and len(ipv6.get_json()["sessions"]) == 1


@pytest.mark.parametrize("header", [
    {"X-Forwarded-For": "203.0.113.7"}, {"X-Forwarded-Host": "hitl.example"}, {"X-Forwarded-Proto": "https"},
    {"x-forwarded-port": "443"}, {"Forwarded": "for=203.0.113.7"}, {"X-Real-IP": "203.0.113.7"},
    {"Via": "1.1 nginx"}, {"X-Client-IP": "203.0.113.7"}, {"True-Client-IP": "203.0.113.7"},
    {"CF-Connecting-IP": "203.0.113.7"},
], ids=lambda header: next(iter(header)))
def test_without_keys_a_client_a_proxy_forwards_is_not_the_local_operator(open_stack: Stack,
                                                                         header: dict[str, str]) -> None:
    """A proxy on this host (nginx, socat, `ssh -L`) connects from loopback; any header a proxy adds gives the
    client away, and it is not the operator. (A proxy that adds none cannot be told apart: docs/access.md.)"""
    session_id, _ = open_stack.start(REFUND, who="alice")
    [request] = open_stack.pending(session_id)
    client = open_stack.client(None)  # from loopback, as a reverse proxy on the same host connects

    approve = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"}, headers=header)
    listing = client.get("/api/sessions", headers=header)

    for response in (approve, listing):
        assert (response.status_code, response.get_json()["error"]["code"]) == (403, "loopback_only")
    assert "HITL_API_KEYS" in approve.get_json()["error"]["message"]
    assert approve.get_json()["error"]["details"]["header"].lower() == next(iter(header)).lower()
    assert [r["status"] for r in open_stack.pending(session_id)] == ["pending"]


def test_without_keys_the_local_operator_may_settle_anyones_request(open_stack: Stack) -> None:
    session_id, _ = open_stack.start(REFUND, who="alice")
    [request] = open_stack.pending(session_id)
    assert request["requestedBy"]["principalId"] == "alice"
    client = open_stack.client(None)

    response = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})

    assert response.status_code == 200
    responder = response.get_json()["responder"]
    assert (responder["authenticator"], responder["principalId"]) == ("operator", "local")
    open_stack.wait_idle()
    [refund] = ran("refund")
    assert (refund["requester"], refund["responder"]) == ("alice", "local")
    assert open_stack.turn(session_id)["status"] == "completed"


@pytest.mark.parametrize("remote", ["10.1.2.3", "192.168.0.7", "2001:db8::1", "localhost", ""])
def test_without_keys_other_clients_are_turned_away(open_stack: Stack, remote: str) -> None:
    session_id, _ = open_stack.start(REFUND, who="alice")
    [request] = open_stack.pending(session_id)
    before = len(open_stack.events(session_id))
    client = open_stack.client(None)
    # a Bearer header does not help when no keys are configured
    client.environ_base.update({"REMOTE_ADDR": remote, "HTTP_AUTHORIZATION": f"Bearer {KEYS['alice']}"})

    for name, route in ROUTES.items():
        response = call(client, route, session_id, request["requestId"])
        assert response.status_code == 403, name
        assert response.get_json()["error"]["code"] == "loopback_only", name

    open_stack.wait_idle()
    assert [r["requestId"] for r in open_stack.pending(session_id)] == [request["requestId"]]
    assert len(open_stack.events(session_id)) == before
    assert read_ledger() == []
    assert len(open_stack.client(None).get("/api/sessions").get_json()["sessions"]) == 1


@pytest.mark.parametrize("host", ["attacker.example:8000", "attacker.example", "localhost.attacker.example",
                                  "127.0.0.1.nip.io:8000"])
def test_without_keys_a_page_rebound_to_loopback_is_turned_away(open_stack: Stack, host: str) -> None:
    """DNS rebinding: a page whose name now resolves to 127.0.0.1 calls the gateway from the victim's browser, same
    origin as far as the browser knows: loopback, but with its own name as Host. It may not act as the operator."""
    session_id, _ = open_stack.start(REFUND, who="alice")
    [request] = open_stack.pending(session_id)
    before = len(open_stack.events(session_id))
    client = open_stack.client(None)

    for name, route in ROUTES.items():
        response = call(client, route, session_id, request["requestId"], base_url=f"http://{host}")
        assert response.status_code == 403, name
        assert response.get_json()["error"]["code"] == "host_not_allowed", name
    for path, accept in ((f"/api/sessions/{session_id}/events", "text/event-stream"), ("/metrics", "text/plain")):
        response = client.get(path, base_url=f"http://{host}", headers={"Accept": accept})
        assert response.status_code == 403, path
    cancel = client.post(f"/api/sessions/{session_id}/cancel", base_url=f"http://{host}")
    assert cancel.status_code == 403

    open_stack.wait_idle()
    assert [r["requestId"] for r in open_stack.pending(session_id)] == [request["requestId"]]
    assert len(open_stack.events(session_id)) == before
    assert read_ledger() == []


@pytest.mark.parametrize("host", ["localhost:8000", "LOCALHOST", "127.0.0.1:8000", "[::1]:8000", "hitl.localhost:8000",
                                  "10.0.0.5:8000"])
def test_without_keys_the_local_operator_may_use_a_local_name_or_an_ip_address(open_stack: Stack, host: str) -> None:
    client = open_stack.client(None)

    response = client.post("/api/sessions", json={"message": LOOKUP}, base_url=f"http://{host}")

    assert response.status_code == 201


def test_without_keys_a_listed_host_is_served(tmp_path: Path) -> None:
    listed = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'open.db'}", agent=TEST_AGENT, api_keys={},
                                      HITL_ALLOWED_HOSTS="hitl.test, devbox"))
    try:
        client = listed.client(None)
        assert client.get("/api/sessions", base_url="http://hitl.test:8000").status_code == 200
        assert client.get("/api/sessions", base_url="http://DevBox").status_code == 200
        assert client.get("/api/sessions", base_url="http://other.test:8000").status_code == 403
    finally:
        listed.close()


def test_without_keys_a_post_from_another_origin_changes_nothing(open_stack: Stack) -> None:
    """A form another site posts to http://127.0.0.1:8000 (no preflight) carries that site's Origin: refused."""
    session_id, _ = open_stack.start(REFUND, who="alice")
    client = open_stack.client(None)

    for origin in ("https://attacker.example", "null", "http://localhost:3000"):
        response = client.post(f"/api/sessions/{session_id}/cancel", base_url="http://127.0.0.1:8000",
                               headers={"Origin": origin, "Content-Type": "application/x-www-form-urlencoded"})
        assert response.status_code == 403, origin
        assert response.get_json()["error"]["code"] == "origin_not_allowed", origin
    assert open_stack.turn(session_id)["status"] == "waiting"

    same = client.post(f"/api/sessions/{session_id}/cancel", base_url="http://127.0.0.1:8000",
                       headers={"Origin": "http://127.0.0.1:8000"})
    assert same.status_code == 202


# -- health -------------------------------------------------------------------------------------------


def test_healthz_reports_the_database_and_redis(stack: Stack) -> None:
    response = stack.client(None).get("/healthz")

    assert response.status_code == 200
    expected = {"database": "ok"} if stack.name == "sqlite" else {"database": "ok", "redis": "ok"}
    assert response.get_json() == {"status": "ok", "checks": expected}


def test_healthz_is_503_when_redis_is_down(tmp_path: Path) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", redis_url="redis://127.0.0.1:1/0",
                        agent=TEST_AGENT, api_keys=API_KEYS)
    started = time.monotonic()
    app = create_app(settings)
    try:
        response = app.test_client().get("/healthz")
    finally:
        app.extensions["hitl"].db.dispose()

    assert time.monotonic() - started < 10, "a dead Redis must not hang start-up or the health check"
    assert response.status_code == 503
    body = response.get_json()
    assert body["status"] != "ok"
    assert body["checks"]["database"] == "ok"
    assert body["checks"]["redis"].startswith("error")


def test_a_web_process_starts_while_postgres_is_down_and_healthz_says_so(caplog: pytest.LogCaptureFixture) -> None:
    """Its migrations cannot be checked then: it starts anyway (a platform's restarts, /healthz and the callers'
    retries carry it until the database is back), and logs that it could not check."""
    settings = Settings(database_url="postgresql://hitl@127.0.0.1:1/hitl", agent=TEST_AGENT, api_keys=API_KEYS)
    started = time.monotonic()
    app = create_app(settings)
    try:
        response = app.test_client().get("/healthz")
    finally:
        for thread in app.extensions["hitl-background"]:  # embedded mode: they would fail on, and say so
            thread.stop()
        app.extensions["hitl"].db.dispose()

    assert time.monotonic() - started < 10, "a dead PostgreSQL must not hang start-up or the health check"
    assert "could not check the database's migrations" in caplog.text
    assert response.status_code == 503
    assert response.get_json()["checks"]["database"].startswith("error")


# -- the demo agent, end to end -----------------------------------------------------------------------


def test_a_demo_refund_through_the_api(tmp_path: Path) -> None:
    demo = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'demo.db'}", agent="gateway.demo:agent",
                                    api_keys=API_KEYS))
    try:
        client = demo.client("alice")
        session_id = created(client, "refund $20 on ch_1001")["id"]
        demo.wait_idle()

        requests = client.get("/api/requests", query_string={"status": "pending"}).get_json()["requests"]
        [request] = requests
        assert request["sessionId"] == session_id
        assert request["kind"] == "tool-approval"
        assert request["prompt"] == "Approve refund charge?"
        assert request["action"]["toolName"] == "refund_charge"
        assert request["action"]["input"] == {"charge_id": "ch_1001", "amount": 20.0}
        [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
        assert turn["status"] == "waiting"

        answered = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})
        assert answered.status_code == 200
        demo.wait_idle()

        [turn] = client.get(f"/api/sessions/{session_id}").get_json()["turns"]
        assert turn["status"] == "completed"
        assert "Refunded 20.00 on ch_1001" in turn["result"]
        assert "approved by alice" in turn["result"]
        types = [e["type"] for e in client.get(f"/api/sessions/{session_id}/events").get_json()["events"]]
        assert types[-2:] == ["turn.completed", "session.waiting"]
        assert client.get("/api/requests", query_string={"status": "pending"}).get_json()["requests"] == []
    finally:
        demo.close()
