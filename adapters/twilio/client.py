"""Outbound SMS through the Twilio REST API (`messages.create`), called from delivery jobs only."""

from __future__ import annotations

import logging
from typing import Any

from twilio.base.exceptions import TwilioException, TwilioRestException
from twilio.http.http_client import TwilioHttpClient
from twilio.http.response import Response
from twilio.rest import Client

from .errors import TwilioApiError, TwilioOptedOut, TwilioRefused

log = logging.getLogger(__name__)

TWILIO_API = "https://api.twilio.com"
OPTED_OUT = 21610
TIMEOUT_SECONDS = 10.0


class ApiUrlHttpClient(TwilioHttpClient):
    """Sends what the SDK addresses to https://api.twilio.com to `api_url` instead (`TWILIO_API_URL`: a test
    server or a regional proxy)."""

    def __init__(self, api_url: str) -> None:
        super().__init__(timeout=TIMEOUT_SECONDS)
        self.api_url = api_url.rstrip("/")

    def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> Response:
        if url.startswith(TWILIO_API):
            url = self.api_url + url[len(TWILIO_API):]
        return super().request(method, url, *args, **kwargs)


class SmsClient:
    """`send(sender, to, body)`: `sender` is our number, or a Messaging Service SID (`MG...`)."""

    def __init__(self, account_sid: str, auth_token: str, api_url: str = TWILIO_API) -> None:
        self.client = Client(account_sid, auth_token, http_client=ApiUrlHttpClient(api_url))
        self.messages = self.client.messages  # the SDK imports it lazily: here, not in every forked job

    def send(self, sender: str, to: str, body: str) -> str:
        """Send one message and return its sid. Raises TwilioOptedOut (21610: the recipient texted STOP),
        TwilioRefused (any other 4xx but a 429: for good) or TwilioApiError (anything else Twilio or the network
        refused: worth retrying)."""
        origin = {"messaging_service_sid": sender} if sender.startswith("MG") else {"from_": sender}
        try:
            message = self.messages.create(to=to, body=body, **origin)
        except TwilioException as exc:  # TwilioServiceException is not a TwilioRestException
            code, status = getattr(exc, "code", None), getattr(exc, "status", None)
            if code == OPTED_OUT:
                raise TwilioOptedOut(f"{to} has opted out of messages from {sender}", code, status) from exc
            detail = exc.msg if isinstance(exc, TwilioRestException) else str(exc)
            for_good = isinstance(status, int) and 400 <= status < 500 and status != 429
            raise (TwilioRefused if for_good else TwilioApiError)(
                f"Twilio refused a message to {to} (error {code}, HTTP {status}): {detail}", code, status) from exc
        return str(message.sid)
