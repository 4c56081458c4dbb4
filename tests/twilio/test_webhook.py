"""POST /twilio/sms: only Twilio, only for our account, only allowed senders, each message once."""

from __future__ import annotations

import hashlib
from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select
from twilio.request_validator import RequestValidator

from adapters.twilio.errors import TwilioVerificationError
from adapters.twilio.verify import verify_twilio_signature
from engine.store.tables import Inbound, Session, Turn
from tests.support.agent import read_ledger, script
from tests.support.signing import twilio_signature
from tests.twilio.fake_api import fixture
from tests.twilio.support import ALICE, AUTH_TOKEN, CAROL, PUBLIC_BASE_URL, WEBHOOK_URL, Sms

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})


def counts(sms: Sms) -> tuple[int, int, int]:
    """Inbound rows, sessions, turns: what a refused or repeated delivery must leave alone."""
    with sms.stack.rt.db.read() as db:
        return tuple(db.execute(select(func.count()).select_from(table)).scalar_one()  # type: ignore[return-value]
                     for table in (Inbound, Session, Turn))


def test_the_sdk_signature_vector() -> None:
    vector = fixture("signature_vector.json")
    assert twilio_signature(vector["auth_token"], vector["url"], vector["params"]) == vector["signature"]
    assert RequestValidator(vector["auth_token"]).validate(vector["url"], vector["params"], vector["signature"])
    form = {name: [value] for name, value in vector["params"].items()}
    verify_twilio_signature(vector["auth_token"], vector["url"], form, {"x-twilio-signature": vector["signature"]})
    with pytest.raises(TwilioVerificationError):
        verify_twilio_signature(vector["auth_token"], vector["url"], {**form, "Digits": ["9999"]},
                                {"x-twilio-signature": vector["signature"]})


def test_a_message_gets_empty_twiml_at_once(sms: Sms) -> None:
    response = sms.post(sms.form(ALICE, "hello"))
    assert response.status_code == 200
    assert response.content_type.startswith("text/xml")
    assert response.get_data(as_text=True) == '<?xml version="1.0" encoding="UTF-8"?><Response />'


@pytest.mark.parametrize("forgery", ["wrong-signature", "no-signature", "tampered-body", "internal-url",
                                     "shared-key", "other-account"])
def test_a_forged_delivery_is_refused_and_changes_nothing(sms: Sms, forgery: str) -> None:
    form = sms.form(ALICE, script([REFUND]))
    if forgery == "wrong-signature":
        response = sms.post(form, signature=twilio_signature("not-our-token", WEBHOOK_URL, form))
    elif forgery == "no-signature":
        response = sms.post(form, signature="")
    elif forgery == "tampered-body":
        signature = twilio_signature(AUTH_TOKEN, WEBHOOK_URL, form)
        response = sms.post({**form, "Body": "approve"}, signature=signature)
    elif forgery == "internal-url":  # what the app sees behind a proxy is not what Twilio signed
        response = sms.post(form, url="http://localhost/twilio/sms")
    elif forgery == "shared-key":  # signed with a Webhook SharedKey, which is not configured
        response = sms.post(form, headers={"X-Twilio-Webhooks-Signature-Settings": "key=KS1,algorithm=HMAC_SHA256"})
    else:
        response = sms.post({**form, "AccountSid": "AC11111111111111111111111111111111"})
    assert response.status_code == 403
    sms.wait()
    assert counts(sms) == (0, 0, 0)
    assert sms.fake.sent == []


def test_the_signature_covers_the_query_and_fields_twilio_adds_later(sms: Sms) -> None:
    form = {**sms.form(ALICE, "hello"), "SomeFieldTwilioAddsTomorrow": "x"}
    url = f"{PUBLIC_BASE_URL}/twilio/sms?tenant=acme"
    response = sms.client.post("/twilio/sms?tenant=acme", data=form,
                               headers={"X-Twilio-Signature": twilio_signature(AUTH_TOKEN, url, form)})
    assert response.status_code == 200
    sms.wait()
    assert sms.inbox(ALICE) == ["noted: hello"]


def test_a_sender_outside_the_allow_list_is_refused(sms: Sms) -> None:
    response = sms.post(sms.form(CAROL, script([REFUND])))
    assert response.status_code == 403
    sms.wait()
    assert counts(sms) == (0, 0, 0)
    assert sms.fake.sent == []


def test_a_signed_request_that_is_not_an_incoming_message_is_a_400(sms: Sms) -> None:
    form = {k: v for k, v in sms.form(ALICE, "hello").items() if k != "From"}
    assert sms.post(form).status_code == 400
    assert counts(sms) == (0, 0, 0)


def test_a_duplicated_delivery_changes_nothing(sms: Sms) -> None:
    """Twilio may deliver one message twice (same MessageSid, same I-Twilio-Idempotency-Token)."""
    form = sms.form(ALICE, script([REFUND]))
    token = {"I-Twilio-Idempotency-Token": "a3f1c2d4-0000-4000-8000-000000000001"}
    assert sms.post(form, headers=token).status_code == 200
    sms.wait()
    before, texts = counts(sms), list(sms.inbox(ALICE))
    assert sms.post(form, headers=token).status_code == 200
    sms.wait()
    assert counts(sms) == before == (1, 1, 1)
    assert sms.inbox(ALICE) == texts
    with sms.stack.rt.db.read() as db:
        [row] = db.execute(select(Inbound)).scalars()
    assert row.external_id.endswith(form["MessageSid"])
    assert row.payload_digest == hashlib.sha256(urlencode(form).encode()).hexdigest()  # of the raw body
    assert row.item is not None and row.item["idempotencyToken"] == token["I-Twilio-Idempotency-Token"]
    assert row.principal is not None and row.principal["principalId"] == f"twilio:{ALICE}"


def test_a_replayed_approval_never_approves_a_later_request(sms: Sms) -> None:
    """Someone who captured alice's signed "1" posts it again when a new approval is waiting."""
    sms.text(ALICE, script([REFUND]))
    approve = sms.form(ALICE, "1")
    assert sms.post(approve).status_code == 200
    sms.wait()
    assert len(read_ledger()) == 1
    sms.text(ALICE, script([("refund", {"charge_id": "ch_2", "amount": 7})]))
    [pending] = sms.stack.pending(sms.session_at(ALICE))
    assert sms.post(approve).status_code == 200
    sms.wait()
    assert [r["requestId"] for r in sms.stack.pending(sms.session_at(ALICE))] == [pending["requestId"]]
    assert [e["charge_id"] for e in read_ledger()] == ["ch_1"]


def test_the_stored_principal_is_the_verified_sender(sms: Sms) -> None:
    sms.text(ALICE, "hello")
    turn = sms.stack.turn(sms.session_at(ALICE))
    assert turn["requestedBy"] == {
        "authenticator": "twilio", "issuer": "twilio:AC00000000000000000000000000000000", "principalType": "user",
        "principalId": f"twilio:{ALICE}", "attributes": {"userName": "alice"}}
