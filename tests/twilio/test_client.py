"""`messages.create` through the SDK, mocked with `responses` (the twilio client sends with requests)."""

from __future__ import annotations

from urllib.parse import parse_qs

import pytest
import responses
from twilio.base.exceptions import TwilioServiceException

from adapters.twilio.client import SmsClient
from adapters.twilio.errors import TwilioApiError, TwilioOptedOut, TwilioRefused
from tests.twilio.fake_api import fixture
from tests.twilio.support import ACCOUNT_SID, ALICE, AUTH_TOKEN, OURS

MESSAGES = f"/2010-04-01/Accounts/{ACCOUNT_SID}/Messages.json"
SERVICE = "MG" + "a" * 32


def sent(call: responses.Call) -> dict[str, list[str]]:
    body = call.request.body
    return parse_qs(body if isinstance(body, str) else (body or b"").decode())


@responses.activate
def test_a_message_is_posted_to_twilio_from_our_number() -> None:
    responses.post(f"https://api.twilio.com{MESSAGES}", json=fixture("message_created.json"), status=201)
    sid = SmsClient(ACCOUNT_SID, AUTH_TOKEN).send(OURS, ALICE, "Approve refund?")
    assert sid == "SM22222222222222222222222222222222"
    assert sent(responses.calls[0]) == {"To": [ALICE], "From": [OURS], "Body": ["Approve refund?"]}


@responses.activate
def test_a_messaging_service_sends_in_place_of_a_number_and_the_api_url_is_replaceable() -> None:
    responses.post(f"http://twilio.test:8080{MESSAGES}", json=fixture("message_created.json"), status=201)
    SmsClient(ACCOUNT_SID, AUTH_TOKEN, api_url="http://twilio.test:8080/").send(SERVICE, ALICE, "hi")
    assert sent(responses.calls[0]) == {"To": [ALICE], "MessagingServiceSid": [SERVICE], "Body": ["hi"]}


@responses.activate
def test_error_21610_means_the_recipient_opted_out() -> None:
    responses.post(f"https://api.twilio.com{MESSAGES}", json=fixture("error_21610.json"), status=400)
    with pytest.raises(TwilioOptedOut) as raised:
        SmsClient(ACCOUNT_SID, AUTH_TOKEN).send(OURS, ALICE, "hi")
    assert (raised.value.code, raised.value.status) == (21610, 400)


@responses.activate
def test_error_21610_as_a_problem_document_is_an_opt_out_too() -> None:
    """twilio-python raises TwilioServiceException for these, which is not a TwilioRestException."""
    responses.post(f"https://api.twilio.com{MESSAGES}", json=fixture("error_21610_problem.json"), status=400)
    with pytest.raises(TwilioOptedOut) as raised:
        SmsClient(ACCOUNT_SID, AUTH_TOKEN).send(OURS, ALICE, "hi")
    assert isinstance(raised.value.__cause__, TwilioServiceException)


@responses.activate
def test_other_errors_are_api_errors_worth_retrying() -> None:
    responses.post(f"https://api.twilio.com{MESSAGES}", json=fixture("error_20500.json"), status=500)
    with pytest.raises(TwilioApiError) as raised:
        SmsClient(ACCOUNT_SID, AUTH_TOKEN).send(OURS, ALICE, "hi")
    assert not isinstance(raised.value, TwilioOptedOut) and raised.value.code == 20500
    assert not isinstance(raised.value, TwilioRefused)


@responses.activate
def test_a_4xx_is_a_refusal_for_good() -> None:
    responses.post(f"https://api.twilio.com{MESSAGES}", json=fixture("error_21614.json"), status=400)
    with pytest.raises(TwilioRefused, match="21614") as raised:
        SmsClient(ACCOUNT_SID, AUTH_TOKEN).send(OURS, ALICE, "hi")
    assert (raised.value.code, raised.value.status) == (21614, 400)
