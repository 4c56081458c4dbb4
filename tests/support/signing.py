"""Sign webhook requests the way each platform does, with test secrets (one golden vector per platform pins
each algorithm in that channel's tests)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections.abc import Mapping

# -- Slack -------------------------------------------------------------------------------------------------


def slack_signature(signing_secret: str, timestamp: str, body: bytes | str) -> str:
    """`X-Slack-Signature`: `v0=` + hex HMAC-SHA256(signing secret, `v0:{timestamp}:{raw body}`)."""
    raw = body.encode() if isinstance(body, str) else body
    signed = b"v0:" + timestamp.encode() + b":" + raw
    return "v0=" + hmac.new(signing_secret.encode(), signed, hashlib.sha256).hexdigest()


def slack_headers(signing_secret: str, body: bytes | str, timestamp: float | None = None,
                  content_type: str = "application/json") -> dict[str, str]:
    """The headers of a request Slack signed at `timestamp` (default: now)."""
    sent = str(int(time.time() if timestamp is None else timestamp))
    return {"Content-Type": content_type, "X-Slack-Request-Timestamp": sent,
            "X-Slack-Signature": slack_signature(signing_secret, sent, body)}


# -- Twilio ------------------------------------------------------------------------------------------------


def twilio_signature(auth_token: str, url: str, form: Mapping[str, str | list[str]]) -> str:
    """`X-Twilio-Signature`: base64 HMAC-SHA1 of the URL followed by each field name and value, fields sorted
    by name (every value of a repeated field, sorted)."""
    signed = url
    for name in sorted(form):
        values = form[name]
        for value in sorted(values if isinstance(values, list) else [values]):
            signed += name + value
    digest = hmac.new(auth_token.encode(), signed.encode(), hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


# -- GitHub ------------------------------------------------------------------------------------------------


def github_signature(secret: str, body: bytes) -> str:
    """`X-Hub-Signature-256`: `sha256=` + hex HMAC-SHA256 of the exact body bytes with the webhook secret."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
