"""The Slack request signature: `v0=` + HMAC-SHA256(signing secret, `v0:{timestamp}:{raw body}`), 5-minute window."""

from __future__ import annotations

import hashlib
import hmac
import time

from .errors import SlackVerificationError

MAX_AGE_SECONDS = 300
"""Slack's replay window: a timestamp further than this from now (either way) is refused."""


def verify_slack_signature(signing_secret: str, timestamp: str | None, signature: str | None, body: bytes,
                           now: float | None = None) -> None:
    """Raise SlackVerificationError unless `signature` signs `body` at `timestamp`, within the window.

    `timestamp` and `signature` are the X-Slack-Request-Timestamp and X-Slack-Signature headers; `body` is the
    raw request body, exactly as received (hashed as bytes: a body that is not UTF-8 is told apart from a forged
    one, and refused once it is known to be Slack's).
    """
    if not timestamp or not signature:
        raise SlackVerificationError("the X-Slack-Request-Timestamp and X-Slack-Signature headers are required")
    if not (timestamp.isascii() and timestamp.isdigit()):
        raise SlackVerificationError("X-Slack-Request-Timestamp is not a Unix time")
    if abs((time.time() if now is None else now) - int(timestamp)) > MAX_AGE_SECONDS:
        raise SlackVerificationError("the request is more than 5 minutes away from now (a replay?)")
    signed = b"v0:" + timestamp.encode() + b":" + body
    expected = "v0=" + hmac.new(signing_secret.encode(), signed, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(expected.encode(), signature.encode("utf-8", "replace")):
        raise SlackVerificationError("X-Slack-Signature does not match the request")
