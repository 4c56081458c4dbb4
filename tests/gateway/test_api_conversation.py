"""The conversation rules through the REST API: typed replies, steer/queue, cancel (issue 3)."""

from __future__ import annotations

from tests.conftest import Stack
from tests.support.agent import read_ledger, script

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 4})])


def start(stack: Stack, message: str = REFUND) -> str:
    created = stack.client("alice").post("/api/sessions", json={"message": message})
    assert created.status_code == 201
    stack.wait_idle()
    return str(created.get_json()["id"])


def test_a_typed_reply_through_the_api_answers_the_open_approval(stack: Stack) -> None:
    sid = start(stack)
    response = stack.client("alice").post(f"/api/sessions/{sid}/input", json={"message": "1"})
    assert response.status_code == 202
    body = response.get_json()
    assert body["effect"] == "answered"
    assert [r["status"] for r in body["results"]] == ["settled"]
    stack.wait_idle()
    assert len(read_ledger()) == 1


def test_turn_policy_goes_with_a_message_only(stack: Stack) -> None:
    sid = start(stack)
    [request] = stack.pending(sid)
    response = stack.client("alice").post(f"/api/sessions/{sid}/input", json={
        "inputResponses": [{"requestId": request["requestId"], "optionId": "approve"}], "turnPolicy": "queue"})
    assert response.status_code == 400
    bad = stack.client("alice").post(f"/api/sessions/{sid}/input", json={"message": "x", "turnPolicy": "later"})
    assert bad.status_code == 400
    assert stack.pending(sid) == [request]


def test_a_steering_message_and_a_queued_one(stack: Stack) -> None:
    sid = start(stack)
    queued = stack.client("bob:operator").post(f"/api/sessions/{sid}/input", json={"message": script(final="bob")})
    assert queued.get_json()["effect"] == "queued"
    steered = stack.client("alice").post(f"/api/sessions/{sid}/input",
                                         json={"message": "never mind", "turnPolicy": "queue"})
    assert steered.get_json()["effect"] == "steered"  # an approval is held, so even "queue" steers
    stack.wait_idle()
    turns = stack.client("alice").get(f"/api/sessions/{sid}").get_json()["turns"]
    assert [(t["status"], t["result"]) for t in turns] == [("completed", "noted: never mind"),
                                                          ("completed", "bob")]
    assert turns[0]["requests"][0]["outcome"] == "ignored"


def test_cancel_through_the_api(stack: Stack) -> None:
    sid = start(stack)
    client = stack.client("alice")
    hidden = stack.client("bob").post(f"/api/sessions/{sid}/cancel")  # bob does not even see alice's session
    assert (hidden.status_code, hidden.get_json()["error"]["code"]) == (404, "not_found")
    [request] = client.get(f"/api/requests?sessionId={sid}").get_json()["requests"]
    assert request["status"] == "pending"
    response = client.post(f"/api/sessions/{sid}/cancel")
    assert response.status_code == 202
    stack.wait_idle()
    session = client.get(f"/api/sessions/{sid}").get_json()
    assert session["turns"][0]["status"] == "cancelled"
    assert session["turns"][0]["requests"][0]["outcome"] == "cancelled"
    again = client.post(f"/api/sessions/{sid}/cancel")
    assert (again.status_code, again.get_json()["error"]["code"]) == (409, "conflict")
    missing = client.post("/api/sessions/ses_nope/cancel")
    assert missing.status_code == 404

    by_operator = stack.client("bob:operator").post(f"/api/sessions/{sid}/input", json={"message": REFUND})
    assert by_operator.get_json()["effect"] == "started"
    stack.wait_idle()
    refused = client.post(f"/api/sessions/{sid}/cancel")  # alice's session, bob's turn
    assert (refused.status_code, refused.get_json()["error"]["code"]) == (403, "not_permitted")
    assert "only bob or an operator may cancel" in refused.get_json()["error"]["message"]
