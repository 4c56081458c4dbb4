"""The Slack request signature: `v0=` + HMAC-SHA256(signing secret, `v0:{timestamp}:{raw body}`), 5-minute window."""

from __future__ import annotations

import hmac
import time

from slack_sdk.signature import SignatureVerifier

from .errors import SlackVerificationError

MAX_AGE_SECONDS = 300
"""Slack's replay window: a timestamp further than this from now (either way) is refused."""


def verify_slack_signature(signing_secret: str, timestamp: str | None, signature: str | None, body: bytes,
                           now: float | None = None) -> None:
    """Raise SlackVerificationError unless `signature` signs `body` at `timestamp`, within the window.

    `timestamp` and `signature` are the X-Slack-Request-Timestamp and X-Slack-Signature headers; `body` is the
    raw request body, exactly as received.
    """
    if not timestamp or not signature:
        raise SlackVerificationError("the X-Slack-Request-Timestamp and X-Slack-Signature headers are required")
    if not (timestamp.isascii() and timestamp.isdigit()):
        raise SlackVerificationError("X-Slack-Request-Timestamp is not a Unix time")
    if abs((time.time() if now is None else now) - int(timestamp)) > MAX_AGE_SECONDS:
        raise SlackVerificationError("the request is more than 5 minutes away from now (a replay?)")
    expected = SignatureVerifier(signing_secret).generate_signature(timestamp=timestamp, body=body)
    if expected is None or not hmac.compare_digest(expected.encode(), signature.encode()):
        raise SlackVerificationError("X-Slack-Signature does not match the request")
