"""Replies by SMS: numbers, labels, free text and approval words answer the prompt on screen, one at a time."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import MAX_STEPS, read_ledger, script
from tests.twilio.support import ALICE, BOB, OURS, Sms, twilio_stack

QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})
REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})


def answer(sms: Sms, number: str = ALICE) -> dict:
    [request] = sms.stack.turn(sms.session_at(number))["requests"]
    return dict(request)


def test_a_question_arrives_as_numbered_text(sms: Sms) -> None:
    sms.text(ALICE, script([QUESTION]))
    assert sms.inbox(ALICE)[-1] == "Which color?\n1. Red - warm\n2. Blue - cool\nReply with a number or your answer."


@pytest.mark.parametrize(("reply", "option", "text"), [
    ("2", "Blue", None), (" blue ", "Blue", None), ("something teal", None, "something teal"),
    ("3", None, "3"),  # digits that are no option's number are an answer of their own
])
def test_a_reply_answers_the_question(sms: Sms, reply: str, option: str | None, text: str | None) -> None:
    sms.text(ALICE, script([QUESTION]))
    sms.text(ALICE, reply)
    request = answer(sms)
    assert (request["outcome"], request["response"]) == ("answered", {"optionId": option, "text": text})
    assert sms.inbox(ALICE)[-2] == f"Which color? Answered: {option or text} (by alice)."


def test_an_approval_asks_for_numbers_never_for_cancel_or_yes(sms: Sms) -> None:
    sms.text(ALICE, script([REFUND]))
    prompt = sms.inbox(ALICE)[-1]
    assert prompt == "Approve refund?\ncharge_id=ch_1, amount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."
    assert "cancel" not in prompt.lower() and "yes" not in prompt.lower()


@pytest.mark.parametrize(("reply", "outcome", "note"), [
    ("1", "approved", None), ("Approve", "approved", None), ("2", "denied", None), ("deny", "denied", None),
    ("Deny: too much", "denied", "too much"),
])
def test_an_approval_is_answered_by_number_or_word(sms: Sms, reply: str, outcome: str, note: str | None) -> None:
    sms.text(ALICE, script([REFUND]))
    sms.text(ALICE, reply)
    request = answer(sms)
    assert request["outcome"] == outcome and (request["response"] or {}).get("text") == note
    assert len(read_ledger()) == (outcome == "approved")
    confirmation = "Approve refund? " + ("Approved by alice." if outcome == "approved" else
                                         f"Denied by alice: {note}" if note else "Denied by alice.")
    assert confirmation in sms.inbox(ALICE)


def test_requests_come_one_at_a_time_in_order(sms: Sms) -> None:
    sms.text(ALICE, script([REFUND, ("refund", {"charge_id": "ch_2", "amount": 6})]))
    [prompt] = sms.inbox(ALICE)[1:]
    assert prompt.startswith("(1 of 2) Approve refund?\ncharge_id=ch_1, amount=5\n")
    sms.text(ALICE, "2")
    assert sms.inbox(ALICE)[2:] == [
        "Approve refund? Denied by alice.",
        "Approve refund?\ncharge_id=ch_2, amount=6\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny).",
    ]
    sms.text(ALICE, "1")
    assert [e["charge_id"] for e in read_ledger()] == ["ch_2"]
    assert sms.inbox(ALICE)[4] == "Approve refund? Approved by alice."
    assert sms.inbox(ALICE)[5].startswith("done")
    sms.text(ALICE, "1")  # a late "1" starts a new turn; it approves nothing
    assert [e["charge_id"] for e in read_ledger()] == ["ch_2"]


def test_the_api_opens_a_session_that_texts_a_number(sms: Sms) -> None:
    created = sms.stack.client("alice").post("/api/sessions", json={
        "message": script([REFUND]), "channel": "twilio", "address": {"to": BOB}})
    assert created.status_code == 201
    sms.wait()
    session = sms.stack.client("alice").get(f"/api/sessions/{created.get_json()['id']}").get_json()
    assert session["address"] == f"twilio:{OURS}:{BOB}" and session["id"] == sms.session_at(BOB)
    assert sms.inbox(BOB)[-1].startswith("Approve refund?")
    for bad in ({"to": "555-1234"}, {"to": BOB, "from": OURS}, {}):
        response = sms.stack.client("alice").post("/api/sessions", json={
            "message": "hi", "channel": "twilio", "address": bad})
        assert (response.status_code, response.get_json()["error"]["code"]) == (422, "invalid_address")


def test_a_number_the_policy_refuses_is_told_why_and_the_request_stays_open(sms: Sms) -> None:
    """alice asks through the API for a refund and its prompt goes to bob's phone; only alice may approve it."""
    created = sms.stack.client("alice").post("/api/sessions", json={
        "message": script([REFUND]), "channel": "twilio", "address": {"to": BOB}})
    sms.wait()
    sms.text(BOB, "1")
    assert sms.inbox(BOB)[-1] == ('Your answer to "Approve refund?" was not accepted: '
                                  "only alice may answer this request")
    [request] = sms.stack.pending(created.get_json()["id"])
    assert request["status"] == "pending" and read_ledger() == []
    assert sms.inbox(ALICE) == []


def test_a_messaging_service_sends_and_replies_reach_its_session(request: pytest.FixtureRequest,
                                                                  tmp_path: Path) -> None:
    service = "MG" + "0" * 32
    with twilio_stack(request, "sqlite", tmp_path, twilio_from=service) as sms:
        created = sms.stack.client("alice").post("/api/sessions", json={
            "message": "hello", "channel": "twilio", "address": {"to": ALICE}})
        sms.wait()
        assert [(m.sender, m.body) for m in sms.fake.sent] == [(service, "noted: hello")]
        sms.text(ALICE, "hello again", MessagingServiceSid=service)  # To is one of the service's numbers
        history = sms.stack.history(created.get_json()["id"])
        assert [t["input"] for t in history["turns"]] == ["hello", "hello again"]
        assert sms.fake.sent[-1].sender == service and sms.fake.sent[-1].body == "noted: hello again"


@pytest.mark.parametrize("reply", ["Stop here", "2"])
def test_the_step_budget_prompt_is_answered_by_the_label_it_shows(sms: Sms, reply: str) -> None:
    """SMS shows the session limit's Stop as "Stop here" (a lone STOP is an opt-out): that label answers it."""
    sms.text(ALICE, script(*[[("lookup", {"order_id": f"o{i}"})] for i in range(MAX_STEPS + 2)]))
    assert "\n2. Stop here\n" in sms.inbox(ALICE)[-1]
    sms.text(ALICE, reply)
    turn = sms.stack.turn(sms.session_at(ALICE))
    assert turn["status"] == "cancelled" and turn["requests"][-1]["response"]["optionId"] == "stop"
