"""`X-Twilio-Signature`: base64 HMAC-SHA1, keyed with the Auth Token, over the public URL followed by every
received POST field (sorted). Twilio signs the URL it was configured with, so behind a proxy the check uses
`PUBLIC_BASE_URL` + path (+ query), never the URL the request arrived at."""

from __future__ import annotations

from collections.abc import Mapping

from twilio.request_validator import RequestValidator

from .errors import TwilioVerificationError

SIGNATURE_HEADER = "x-twilio-signature"
SHARED_KEY_HEADER = "x-twilio-webhooks-signature-settings"
"""Present when a Webhook Rule signs with a SharedKey instead of the Auth Token (not configured here)."""


class FormFields(dict[str, list[str]]):
    """Every value of every received field, in the shape RequestValidator reads (`getlist`)."""

    def getlist(self, name: str) -> list[str]:
        return self[name]


def public_url(base_url: str, path: str, query: str = "") -> str:
    """The URL Twilio requested, as configured in the console: `PUBLIC_BASE_URL` + path (+ `?query`)."""
    url = base_url.rstrip("/") + path
    return f"{url}?{query}" if query else url


def verify_twilio_signature(auth_token: str, url: str, form: Mapping[str, list[str]],
                            headers: Mapping[str, str]) -> None:
    """Raise TwilioVerificationError unless `headers` carry Twilio's signature of `url` and `form`.

    `headers` are keyed in lower case."""
    signature = headers.get(SIGNATURE_HEADER)
    if not signature:
        raise TwilioVerificationError("no X-Twilio-Signature header")
    if headers.get(SHARED_KEY_HEADER):
        raise TwilioVerificationError("signed with a SharedKey (X-Twilio-Webhooks-Signature-Settings); "
                                      "only the Auth Token is configured")
    if not RequestValidator(auth_token).validate(url, FormFields(form), signature):
        raise TwilioVerificationError(f"X-Twilio-Signature does not match {url}")
