"""The Twilio adapter's errors; the gateway turns them into HTTP (verification 403, parse 400)."""

from __future__ import annotations

from engine.channels.contract import ChannelRefused


class TwilioError(Exception):
    """Anything the Twilio adapter refuses or fails at."""


class TwilioVerificationError(TwilioError):
    """The request is not from Twilio for this account: a missing or wrong `X-Twilio-Signature`."""


class TwilioSenderRefused(TwilioError):
    """A genuine message from a number that is not in `TWILIO_ALLOW_FROM`."""


class TwilioParseError(TwilioError):
    """A signed request without the fields of an incoming message."""


class TwilioApiError(TwilioError):
    """The REST API refused or failed a request; `code` is Twilio's error code when it gave one."""

    def __init__(self, message: str, code: int | None = None, status: int | None = None) -> None:
        super().__init__(message)
        self.code, self.status = code, status


class TwilioOptedOut(TwilioApiError):
    """Error 21610: the recipient texted STOP to this sender; sending again cannot succeed until START."""


class TwilioRefused(TwilioApiError, ChannelRefused):
    """A 4xx other than a rate limit (21211 an invalid number, 21614 not a mobile number, 21408 a region not
    enabled, 20003 bad credentials...): sending the message again cannot succeed, so delivery does not retry it."""
