"""WhatsApp through Twilio: the same webhook and Messages API, with `whatsapp:+E.164` addresses on both sides."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from adapters.twilio.channel import split_address
from adapters.twilio.render import MAX_BODY, render_prompt
from engine.channels.contacts import is_reachable
from engine.channels.contract import QueuePosition
from gateway.compose import ConfigurationError
from tests.support.agent import read_ledger, script
from tests.twilio.support import ALICE, ALLOW_FROM, BOB, OURS, WHATSAPP, Sms, twilio_stack
from tests.twilio.test_config import app_with
from tests.twilio.test_render import request as approval

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
YES_NO = ("ask_question", {"question": "Proceed?", "options": [{"label": "Yes"}, {"label": "No"}]})
WA_OURS, WA_ALICE, WA_BOB = WHATSAPP + OURS, WHATSAPP + ALICE, WHATSAPP + BOB
WA_ALLOW_FROM = [*ALLOW_FROM.split(","), f"alice={WA_ALICE}"]
"""alice may write on WhatsApp too; bob's number is listed for SMS only."""


@pytest.fixture
def wa(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sms]:
    """The Twilio channel texting from our SMS number, whose WhatsApp sender posts to the same webhook."""
    with twilio_stack(request, "sqlite", tmp_path, twilio_allow_from=WA_ALLOW_FROM) as built:
        yield built


def test_an_approval_round_trips_over_whatsapp(wa: Sms) -> None:
    wa.text(WA_ALICE, script([REFUND]))
    session_id = wa.session_at(WA_ALICE)
    assert wa.stack.history(session_id)["address"] == f"twilio:{WA_OURS}:{WA_ALICE}"
    assert wa.inbox(WA_ALICE) == [
        "step 1", "Approve refund?\ncharge_id=ch_1, amount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."]

    wa.text(WA_ALICE, "1")
    assert [(e["charge_id"], e["responder"]) for e in read_ledger()] == [("ch_1", f"twilio:{WA_ALICE}")]
    assert wa.stack.turn(session_id)["status"] == "completed"
    confirmation, final = wa.inbox(WA_ALICE)[2:]
    assert confirmation == "Approve refund? Approved by alice." and final.startswith("done")
    assert {(m.sender, m.to) for m in wa.fake.sent} == {(WA_OURS, WA_ALICE)}  # never by SMS to her number


def test_a_whatsapp_sender_is_its_own_principal_and_session(wa: Sms) -> None:
    """WhatsApp and SMS are two ways to reach a number, not one: a number's SMS and its WhatsApp account can
    belong to different people (a recycled number keeps the old owner's WhatsApp), so neither vouches for the
    other, and a plain number in TWILIO_ALLOW_FROM does not let its WhatsApp in."""
    wa.text(WA_ALICE, "hello")
    wa.text(ALICE, "hello")
    assert wa.session_at(WA_ALICE) != wa.session_at(ALICE)
    principal = wa.stack.turn(wa.session_at(WA_ALICE))["requestedBy"]
    assert principal == {"authenticator": "twilio", "issuer": "twilio:AC00000000000000000000000000000000",
                         "principalType": "user", "principalId": f"twilio:{WA_ALICE}",
                         "attributes": {"userName": "alice"}}  # ProfileName is chosen by the sender: unused
    assert wa.stack.turn(wa.session_at(ALICE))["requestedBy"]["principalId"] == f"twilio:{ALICE}"
    assert wa.post(wa.form(WA_BOB, "hello")).status_code == 403


def test_a_message_whose_from_and_to_disagree_is_a_400(wa: Sms) -> None:
    assert wa.post(wa.form(WA_ALICE, "hello", To=OURS)).status_code == 400
    assert wa.post(wa.form(ALICE, "hello", To=WA_OURS)).status_code == 400


@pytest.mark.parametrize("word", ["STOP", "cancel", "YES", "help"])
def test_twilio_keeps_no_keywords_on_whatsapp_and_none_approves(wa: Sms, word: str) -> None:
    """Twilio acts on STOP, START and HELP for SMS only: on WhatsApp they reach us as words the person wrote."""
    wa.text(WA_ALICE, script([REFUND]))
    wa.text(WA_ALICE, word)
    assert is_reachable(wa.stack.rt, "twilio", f"twilio:{WA_OURS}:{WA_ALICE}")
    [request] = wa.stack.turn(wa.session_at(WA_ALICE))["requests"]
    assert request["outcome"] == ("denied" if word == "cancel" else "ignored")  # cancel is the Deny option
    assert read_ledger() == []
    assert wa.inbox(WA_ALICE)[-1].startswith("done" if word == "cancel" else f"noted: {word}")


def test_a_whatsapp_question_is_answered_with_its_words(wa: Sms) -> None:
    wa.text(WA_ALICE, script([YES_NO]))
    assert wa.inbox(WA_ALICE)[-1] == "Proceed?\n1. Yes\n2. No\nReply with a number or your answer."
    wa.text(WA_ALICE, "yes")
    [request] = wa.stack.turn(wa.session_at(WA_ALICE))["requests"]
    assert (request["outcome"], request["response"]["optionId"]) == ("answered", "Yes")


def test_a_whatsapp_prompt_is_not_cut_to_two_sms_segments_but_to_the_body_limit() -> None:
    long = approval(action={"kind": "tool-call", "callId": "c1", "toolName": "refund",
                            "input": {"note": "word " * 100}})
    sms, whatsapp = render_prompt(long, QueuePosition(1, 1)), render_prompt(long, QueuePosition(1, 1), whatsapp=True)
    assert len(sms) <= 2 * 153 and "word " * 99 + "word" in whatsapp
    huge = approval(prompt="Approve " + "x" * 3000 + "?")
    body = render_prompt(huge, QueuePosition(1, 1), whatsapp=True)
    assert len(body) <= MAX_BODY and body.endswith("\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny).")


def test_the_api_opens_a_whatsapp_session_from_a_whatsapp_sender(request: pytest.FixtureRequest,
                                                                 tmp_path: Path) -> None:
    with twilio_stack(request, "sqlite", tmp_path, twilio_from=WA_OURS, twilio_allow_from=WA_ALLOW_FROM) as wa:
        created = wa.stack.client("alice").post("/api/sessions", json={
            "message": script([REFUND]), "channel": "twilio", "address": {"to": WA_ALICE}})
        assert created.status_code == 201
        wa.wait()
        assert created.get_json()["id"] == wa.session_at(WA_ALICE)
        assert [(m.sender, m.to) for m in wa.fake.sent] == [(WA_OURS, WA_ALICE)] * 2
        assert wa.inbox(WA_ALICE)[-1].startswith("Approve refund?")
        response = wa.stack.client("alice").post("/api/sessions", json={
            "message": "hi", "channel": "twilio", "address": {"to": ALICE}})
        assert (response.status_code, response.get_json()["error"]["code"]) == (422, "invalid_address")
        assert "whatsapp:+" in response.get_json()["error"]["message"]


def test_an_sms_sender_cannot_open_a_whatsapp_session(wa: Sms) -> None:
    response = wa.stack.client("alice").post("/api/sessions", json={
        "message": "hi", "channel": "twilio", "address": {"to": WA_ALICE}})
    assert (response.status_code, response.get_json()["error"]["code"]) == (422, "invalid_address")
    assert "TWILIO_FROM" in response.get_json()["error"]["message"]


def test_a_messaging_service_sends_whatsapp_too(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    service = "MG" + "0" * 32
    with twilio_stack(request, "sqlite", tmp_path, twilio_from=service, twilio_allow_from=WA_ALLOW_FROM) as wa:
        created = wa.stack.client("alice").post("/api/sessions", json={
            "message": "hello", "channel": "twilio", "address": {"to": WA_ALICE}})
        wa.wait()
        assert [(m.sender, m.to, m.body) for m in wa.fake.sent] == [(service, WA_ALICE, "noted: hello")]
        wa.text(WA_ALICE, "hello again", MessagingServiceSid=service)
        assert [t["input"] for t in wa.stack.history(created.get_json()["id"])["turns"]] == ["hello", "hello again"]


def test_old_and_whatsapp_addresses_parse() -> None:
    service = "MG" + "0" * 32
    assert split_address(f"twilio:{OURS}:{ALICE}") == (OURS, ALICE)
    assert split_address(f"twilio:{service}:{ALICE}") == (service, ALICE)
    assert split_address(f"twilio:{WA_OURS}:{WA_ALICE}") == (WA_OURS, WA_ALICE)
    assert split_address(f"twilio:{service}:{WA_ALICE}") == (service, WA_ALICE)
    with pytest.raises(ValueError):
        split_address(f"github:{OURS}:{ALICE}")


def test_a_whatsapp_sender_and_allow_list_entries_are_accepted_at_start(tmp_path: Path) -> None:
    app_with(tmp_path, twilio_from=WA_OURS, twilio_allow_from=WA_ALLOW_FROM)


@pytest.mark.parametrize(("field", "value", "named"), [
    ("twilio_from", "whatsapp:15550001000", "TWILIO_FROM"), ("twilio_from", "whatsapp:MG" + "0" * 32, "TWILIO_FROM"),
    ("twilio_allow_from", ["alice=whatsapp:5551111"], "TWILIO_ALLOW_FROM")])
def test_malformed_whatsapp_settings_fail_at_start(tmp_path: Path, field: str, value: object, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        app_with(tmp_path, **{field: value})
