"""Who may see, per person (docs/right-people.md#who-sees-what): a principal sees what any principal of its person
sees. alice starts a session in Slack; once her Slack account and her API key are one person, her key lists and
reads that session and its requests (history, events, the event stream, the inbox, the long-poll), and the request
of carol's she answered in Slack; bob still gets 404; unlinked, they are hidden from her key again. On SQLite and
on PostgreSQL (the lists' filters are SQL)."""

from __future__ import annotations

from flask.testing import FlaskClient

from engine.answers.submit import submit_responses
from engine.protocol import InputResponse, Principal
from engine.turns.sessions import open_session
from tests.conftest import Stack
from tests.gateway.test_access import SSE, ids
from tests.gateway.test_api import REFUND

SLACK_ALICE = Principal(authenticator="slack", issuer="slack:T1", principal_type="user", principal_id="slack:T1:U1",
                        attributes={"userName": "alice"})
ROUTES = ("/api/sessions/{sid}", "/api/sessions/{sid}/events", "/api/requests/{rid}")
"""History, events and the request; the event stream, the inbox and the long-poll are read by the same rules."""


def statuses(client: FlaskClient, session_id: str, request_id: str) -> list[int]:
    return [client.get(route.format(sid=session_id, rid=request_id)).status_code for route in ROUTES]


def test_a_persons_api_key_sees_what_their_slack_account_started_and_answered_until_unlinked(stack: Stack) -> None:
    opened = open_session(stack.rt, SLACK_ALICE, message=REFUND)
    carols, _ = stack.start(REFUND, who="carol")
    [mine] = stack.pending(opened.session_id)
    [theirs] = stack.pending(carols)
    [refused] = submit_responses(stack.rt, SLACK_ALICE, [InputResponse(request_id=theirs["requestId"],
                                                                       option_id="approve")])
    assert refused.status == "refused"  # only carol may; the response is kept all the same
    alice, bob, operator = stack.client("alice"), stack.client("bob"), stack.client("bob:operator")
    session_id, request_id = opened.session_id, mine["requestId"]

    assert statuses(alice, session_id, request_id) == [404, 404, 404]
    assert ids(alice, "/api/sessions", "sessions") == []
    assert ids(alice, "/api/requests", "requests") == []

    linked = operator.post("/api/people", json={"name": "alice", "principals": ["slack:T1:U1", "alice"]})
    assert linked.status_code == 201, linked.get_data(as_text=True)

    assert statuses(alice, session_id, request_id) == [200, 200, 200]
    assert ids(alice, "/api/sessions", "sessions") == [session_id]
    assert sorted(ids(alice, "/api/requests", "requests")) == sorted([request_id, theirs["requestId"]])
    assert ids(alice, "/api/requests", "requests", sessionId=session_id) == [request_id]
    assert alice.get(f"/api/requests/{theirs['requestId']}").status_code == 200
    assert sorted(alice.get("/api/inbox/events").get_json()["requestIds"]) == sorted([request_id,
                                                                                     theirs["requestId"]])
    stream = alice.get(f"/api/sessions/{session_id}/events", headers=SSE)
    assert stream.status_code == 200
    stream.close()
    polled = alice.get(f"/api/requests/{request_id}", query_string={"wait": 1})
    assert (polled.status_code, polled.get_json()["status"]) == (200, "pending")
    assert alice.get(f"/api/sessions/{carols}").status_code == 404  # answering one request shows no session
    assert statuses(bob, session_id, request_id) == [404, 404, 404]
    assert ids(bob, "/api/sessions", "sessions") == [] and ids(bob, "/api/requests", "requests") == []

    assert operator.put("/api/people/alice", json={"principals": ["slack:T1:U1"]}).status_code == 200

    assert statuses(alice, session_id, request_id) == [404, 404, 404]
    assert ids(alice, "/api/sessions", "sessions") == [] and ids(alice, "/api/requests", "requests") == []
    assert alice.get(f"/api/sessions/{session_id}/events", headers=SSE).status_code == 404
    assert alice.get("/api/inbox/events").get_json()["requestIds"] == []

    assert operator.put("/api/people/alice", json={"principals": ["slack:T1:U1", "alice"]}).status_code == 200
    assert ids(alice, "/api/sessions", "sessions") == [session_id]
    assert operator.delete("/api/people/alice").status_code in (200, 204)

    assert statuses(alice, session_id, request_id) == [404, 404, 404]
    assert ids(alice, "/api/sessions", "sessions") == [] and ids(alice, "/api/requests", "requests") == []
