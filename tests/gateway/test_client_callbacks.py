"""gateway.client.verify_callback checks a callback as the `standardwebhooks` package signs and verifies it."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from standardwebhooks import Webhook

from gateway.client import CallbackRefused, verify_callback

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
NOW = 1_700_000_000
BODY = json.dumps({"type": "input.resolved", "request": {"requestId": "req_1", "outcome": "approved"}})


def signed(body: str = BODY, secret: str = SECRET, at: int = NOW) -> dict[str, str]:
    """The headers the gateway sends, made by the `standardwebhooks` package."""
    return {"Webhook-Id": "msg_req_1", "Webhook-Timestamp": str(at),
            "Webhook-Signature": Webhook(secret).sign("msg_req_1", datetime.fromtimestamp(at, UTC), body)}


def test_a_callback_signed_with_the_secret_is_its_payload() -> None:
    assert verify_callback(BODY.encode(), signed(), SECRET, now=NOW + 299)["request"]["outcome"] == "approved"
    headers = {**signed(), "Webhook-Signature": "v1,b3RoZXI= " + signed()["Webhook-Signature"]}  # a key rotated
    assert verify_callback(BODY, headers, SECRET, now=NOW)["type"] == "input.resolved"


def test_the_secret_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_CALLBACK_SECRET", SECRET)
    assert verify_callback(BODY, signed(), now=NOW)["type"] == "input.resolved"

    monkeypatch.delenv("HITL_CALLBACK_SECRET")
    with pytest.raises(ValueError, match="HITL_CALLBACK_SECRET"):
        verify_callback(BODY, signed(), now=NOW)


@pytest.mark.parametrize(("body", "headers", "now", "why"), [
    (BODY, signed(secret="whsec_" + "A" * 32), NOW, "no webhook-signature matches"),
    (BODY.replace("approved", "denied"), signed(), NOW, "no webhook-signature matches"),
    (BODY, signed(), NOW + 301, "more than 5 minutes"),
    (BODY, signed(), NOW - 301, "more than 5 minutes"),
    (BODY, {"webhook-signature": signed()["Webhook-Signature"]}, NOW, "no webhook-id or webhook-timestamp"),
], ids=["another secret", "another body", "too late", "too early", "no id"])
def test_a_callback_not_signed_now_with_the_secret_is_refused(body: str, headers: dict[str, str], now: int,
                                                              why: str) -> None:
    with pytest.raises(CallbackRefused, match=why):
        verify_callback(body, headers, SECRET, now=now)
