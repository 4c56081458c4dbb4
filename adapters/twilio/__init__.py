"""Twilio SMS and WhatsApp: a text-only channel showing one request at a time (DESIGN.md section 7)."""

from .channel import TwilioChannel, TwilioConfig
from .client import SmsClient
from .errors import (
    TwilioApiError,
    TwilioError,
    TwilioOptedOut,
    TwilioParseError,
    TwilioSenderRefused,
    TwilioVerificationError,
)
from .parse import E164, MESSAGING_SERVICE, TWILIO_NUMBER, parse_allow_list

__all__ = [
    "E164",
    "MESSAGING_SERVICE",
    "SmsClient",
    "TWILIO_NUMBER",
    "TwilioApiError",
    "TwilioChannel",
    "TwilioConfig",
    "TwilioError",
    "TwilioOptedOut",
    "TwilioParseError",
    "TwilioSenderRefused",
    "TwilioVerificationError",
    "parse_allow_list",
]
