"""The Slack signature: Slack's worked example, and the 5-minute window to the second."""

from __future__ import annotations

import pytest

from adapters.slack import SlackVerificationError, verify_slack_signature
from tests.slack.workspace import fixture
from tests.support.signing import slack_signature

VECTOR = fixture("signature_vector")
SECRET, SENT, BODY, SIGNATURE = (VECTOR[k] for k in ("signing_secret", "timestamp", "body", "signature"))


def verify(signature: str | None = SIGNATURE, timestamp: str | None = SENT, body: str = BODY,
           now: float = int(SENT)) -> None:
    verify_slack_signature(SECRET, timestamp, signature, body.encode(), now=now)


def test_slacks_worked_example_verifies() -> None:
    verify()


def test_the_test_signer_reproduces_slacks_worked_example() -> None:
    assert slack_signature(SECRET, SENT, BODY) == SIGNATURE


@pytest.mark.parametrize("age", [300, -300, 0])
def test_a_request_up_to_300_seconds_away_passes(age: int) -> None:
    verify(now=int(SENT) + age)


@pytest.mark.parametrize("age", [301, -301])
def test_a_request_301_seconds_away_fails(age: int) -> None:
    with pytest.raises(SlackVerificationError, match="5 minutes"):
        verify(now=int(SENT) + age)


@pytest.mark.parametrize("change", [
    {"body": BODY.replace("roadrunner", "coyote")},
    {"signature": SIGNATURE[:-1] + "0"},
    {"signature": "v1=" + SIGNATURE[3:]},
    {"signature": None},
    {"timestamp": None},
    {"timestamp": "1531420618.5"},
    {"timestamp": str(int(SENT) + 1), "now": int(SENT) + 1},  # re-timed: the signature covers the timestamp
])
def test_anything_else_fails(change: dict) -> None:
    with pytest.raises(SlackVerificationError):
        verify(**change)
