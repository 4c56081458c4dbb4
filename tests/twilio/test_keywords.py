"""Words Twilio acts on itself (STOP, START, HELP and their synonyms), and Twilio refusing to send."""

from __future__ import annotations

import logging

import pytest

from engine.answers.submit import submit_responses
from engine.channels.contacts import is_reachable
from engine.jobs.recovery import sweep
from engine.protocol import InputResponse, operator_principal
from tests.support.agent import read_ledger, script
from tests.twilio.fake_api import fixture
from tests.twilio.support import ALICE, CAROL, OURS, Sms

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
TWO_REFUNDS = script([REFUND, ("refund", {"charge_id": "ch_2", "amount": 6})])
QUESTION = ("ask_question", {"question": "Proceed?", "options": [{"label": "Yes please"}, {"label": "No thanks"}]})
ALICE_ADDRESS = f"twilio:{OURS}:{ALICE}"


def reachable(sms: Sms) -> bool:
    return is_reachable(sms.stack.rt, "twilio", ALICE_ADDRESS)


def operator_approves(sms: Sms, request_id: str) -> None:
    submit_responses(sms.stack.rt, operator_principal("ops"), [InputResponse(request_id=request_id,
                                                                             option_id="approve")])
    sms.wait()


def messages_received(sms: Sms) -> list[str]:
    return [e["data"]["text"] for e in sms.stack.events(sms.session_at(ALICE)) if e["type"] == "message.received"]


@pytest.mark.parametrize("word", ["STOP", "CANCEL", " stop ", "Quit"])
def test_an_opt_out_word_makes_the_number_unreachable_and_is_never_a_denial(sms: Sms, word: str) -> None:
    sms.text(ALICE, script([REFUND]))
    [request] = sms.stack.pending(sms.session_at(ALICE))
    texts = list(sms.inbox(ALICE))
    sms.text(ALICE, word)
    assert not reachable(sms)
    assert sms.stack.pending(sms.session_at(ALICE)) == [request]  # still open for other channels
    assert word not in messages_received(sms)
    operator_approves(sms, request["requestId"])
    assert [e["charge_id"] for e in read_ledger()] == ["ch_1"]
    assert sms.inbox(ALICE) == texts  # no confirmation, no final answer: the number said STOP


def test_cancel_with_a_note_is_a_denial_not_an_opt_out(sms: Sms) -> None:
    sms.text(ALICE, script([REFUND]))
    sms.text(ALICE, "cancel too expensive")
    [request] = sms.stack.turn(sms.session_at(ALICE))["requests"]
    assert (request["outcome"], request["response"]["text"]) == ("denied", "too expensive")
    assert reachable(sms)
    assert "Approve refund? Denied by alice: too expensive" in sms.inbox(ALICE)


@pytest.mark.parametrize("word", ["START", "YES", "unstop"])
def test_an_opt_in_word_reenables_the_number_and_shows_what_it_missed(sms: Sms, word: str) -> None:
    sms.text(ALICE, TWO_REFUNDS)
    first, second = sms.stack.pending(sms.session_at(ALICE))
    sms.text(ALICE, "STOP")
    operator_approves(sms, first["requestId"])  # the second prompt is due now, but not sent
    texts = list(sms.inbox(ALICE))
    assert not any("amount=6" in t for t in texts)

    sms.text(ALICE, word)
    assert reachable(sms)
    assert sms.stack.pending(sms.session_at(ALICE)) == [second]  # YES answered nothing
    new = sms.inbox(ALICE)[len(texts):]
    assert len(new) == 1 and new[0].startswith("Approve refund?\ncharge_id=ch_2, amount=6\n1. Approve")
    sms.text(ALICE, "1")
    assert [e["charge_id"] for e in read_ledger()] == ["ch_1", "ch_2"]
    assert "Approve refund? Approved by alice." in sms.inbox(ALICE)


def test_yes_never_answers_a_question(sms: Sms) -> None:
    sms.text(ALICE, script([QUESTION]))
    sms.text(ALICE, "YES")
    [request] = sms.stack.pending(sms.session_at(ALICE))
    assert request["prompt"] == "Proceed?"
    assert "YES" not in messages_received(sms)
    sms.text(ALICE, "1")
    assert sms.stack.turn(sms.session_at(ALICE))["requests"][0]["response"]["optionId"] == "Yes please"


@pytest.mark.parametrize("word", ["HELP", "info"])
def test_help_is_never_an_answer(sms: Sms, word: str) -> None:
    sms.text(ALICE, script([REFUND]))
    texts = list(sms.inbox(ALICE))
    sms.text(ALICE, word)
    assert len(sms.stack.pending(sms.session_at(ALICE))) == 1
    assert word not in messages_received(sms)
    assert reachable(sms)
    assert sms.inbox(ALICE) == texts  # Twilio sends its own help reply


def test_error_21610_marks_the_number_unreachable_without_retrying(sms: Sms) -> None:
    sms.fake.fail(ALICE, 400, fixture("error_21610.json"))
    sms.text(ALICE, script([REFUND]))
    assert sms.fake.attempts == [ALICE]  # "step 1" was refused; nothing else was tried
    assert not reachable(sms)
    [request] = sms.stack.pending(sms.session_at(ALICE))
    sweep(sms.stack.rt)
    operator_approves(sms, request["requestId"])
    assert sms.fake.attempts == [ALICE]
    assert sms.stack.turn(sms.session_at(ALICE))["status"] == "completed"


def test_other_failures_are_retried_and_nothing_is_sent_twice(sms: Sms) -> None:
    sms.fake.fail(ALICE, 500, fixture("error_20500.json"), times=1)
    sms.text(ALICE, script([REFUND]))  # the delivery job fails at "step 1" and stops there
    sweep(sms.stack.rt)  # (or the embedded server's own sweeper, whichever comes first)
    sms.wait()
    texts = sms.inbox(ALICE)
    assert len(texts) == 2 and texts[0] == "step 1" and texts[1].startswith("Approve refund?")
    assert sms.fake.attempts == [ALICE] * 3
    assert reachable(sms)


def test_a_message_twilio_refuses_for_good_is_logged_once_and_the_session_goes_on(
        sms: Sms, caplog: pytest.LogCaptureFixture) -> None:
    sms.fake.fail(CAROL, 400, fixture("error_21614.json"))  # a landline
    client = sms.stack.client("alice")
    with caplog.at_level(logging.ERROR):
        created = client.post("/api/sessions", json={
            "message": script([REFUND]), "channel": "twilio", "address": {"to": CAROL}})
        sms.wait()
    session_id = created.get_json()["id"]
    [request] = sms.stack.pending(session_id)
    assert sms.fake.attempts == [CAROL] * 2  # "step 1" and the prompt, each tried once
    [error] = [r.getMessage() for r in caplog.records if request["requestId"] in r.getMessage()]
    assert session_id in error and "twilio" in error and "21614" in error
    assert sweep(sms.stack.rt).redelivered == 0  # nothing left to retry
    answered = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})
    assert answered.status_code == 200, answered.get_json()
    sms.wait()
    sweep(sms.stack.rt)
    sms.wait()
    assert sms.fake.attempts == [CAROL] * 4  # the confirmation and the answer, each tried once too
    assert sms.stack.turn(session_id)["status"] == "completed"
    assert is_reachable(sms.stack.rt, "twilio", f"twilio:{OURS}:{CAROL}")  # not a STOP: the next message is tried


def test_a_reply_to_the_prompt_on_screen_never_answers_one_not_texted(sms: Sms) -> None:
    """alice's phone shows the first prompt; an operator approved it meanwhile, and the second was not texted
    (she had texted STOP). Her "1" is a late answer to the first, never an approval of the second."""
    sms.text(ALICE, TWO_REFUNDS)
    first, second = sms.stack.pending(sms.session_at(ALICE))
    sms.text(ALICE, "STOP")
    operator_approves(sms, first["requestId"])
    sms.text(ALICE, "1")
    assert sms.stack.pending(sms.session_at(ALICE)) == [second]
    assert any("already closed (approved)" in m for m in messages_received(sms))
    sms.text(ALICE, "START")  # the second prompt is texted: now "1" approves it
    sms.text(ALICE, "1")
    assert [e["charge_id"] for e in read_ledger()] == ["ch_1", "ch_2"]
