"""Incoming messages: the form Twilio posts, the keywords Twilio acts on itself, the allow list, the principal.

WhatsApp comes through the same webhook and API: its `From` and `To` are `whatsapp:+E.164`, and Twilio acts on
no keyword there (STOP filtering is an SMS carrier rule), so on WhatsApp every word is the person's reply.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from engine.protocol import Principal

from .errors import TwilioParseError

E164 = re.compile(r"^\+[1-9][0-9]{1,14}$")
WHATSAPP = "whatsapp:"
TWILIO_NUMBER = re.compile(r"^(whatsapp:)?\+[1-9][0-9]{1,14}$")
"""A number Twilio messages: E.164 for SMS, `whatsapp:` + E.164 for WhatsApp."""
MESSAGING_SERVICE = re.compile(r"^MG[0-9a-fA-F]{32}$")


def is_whatsapp(number: str) -> bool:
    return number.startswith(WHATSAPP)


class Keyword(Enum):
    """What Twilio does with a single-word message before it reaches us (it still forwards it)."""

    OPT_OUT = "opt-out"
    OPT_IN = "opt-in"
    HELP = "help"


KEYWORDS = {
    **dict.fromkeys(["STOP", "STOPALL", "UNSUBSCRIBE", "CANCEL", "END", "QUIT"], Keyword.OPT_OUT),
    **dict.fromkeys(["START", "YES", "UNSTOP"], Keyword.OPT_IN),
    **dict.fromkeys(["HELP", "INFO"], Keyword.HELP),
}


class TwilioInbound(BaseModel):
    """The fields of an incoming message we use; Twilio adds fields without notice, so extras are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    message_sid: str = Field(alias="MessageSid", min_length=1)
    account_sid: str = Field(alias="AccountSid", min_length=1)
    sender: str = Field(alias="From", pattern=TWILIO_NUMBER.pattern)
    to: str = Field(alias="To", min_length=1)
    body: str = Field("", alias="Body")
    messaging_service_sid: str | None = Field(None, alias="MessagingServiceSid")

    @model_validator(mode="after")
    def one_medium(self) -> TwilioInbound:
        """A WhatsApp message is from and to `whatsapp:` addresses, an SMS from and to plain numbers."""
        if is_whatsapp(self.sender) != is_whatsapp(self.to):
            raise ValueError(f"From {self.sender} and To {self.to} are not both WhatsApp or both SMS")
        return self

    @property
    def keyword(self) -> Keyword | None:
        """STOP/START/HELP words count only as the whole message (trimmed, any case), as Twilio reads them, and
        only by SMS: Twilio acts on none of them on WhatsApp."""
        return None if is_whatsapp(self.sender) else KEYWORDS.get(self.body.strip().upper())


def parse_twilio_form(form: Mapping[str, list[str]]) -> TwilioInbound:
    try:
        return TwilioInbound.model_validate({name: values[0] for name, values in form.items() if values})
    except ValidationError as exc:
        raise TwilioParseError(f"not an incoming message: {exc.error_count()} field(s) missing or wrong") from exc


def parse_allow_list(entries: Iterable[str]) -> dict[str, str | None]:
    """`TWILIO_ALLOW_FROM` entries, `+15551230001` or `alice=+15551230001` (`alice=whatsapp:+15551230001` for
    WhatsApp): number -> display name."""
    allowed: dict[str, str | None] = {}
    for entry in entries:
        name, _, number = entry.rpartition("=")
        if not TWILIO_NUMBER.match(number.strip()):
            raise ValueError("TWILIO_ALLOW_FROM entries are E.164 numbers (name=+15551230001), or "
                             f"whatsapp:+E.164 for WhatsApp (name=whatsapp:+15551230001), not {entry!r}")
        allowed[number.strip()] = name.strip() or None
    return allowed


def twilio_principal(account_sid: str, number: str, name: str | None = None) -> Principal:
    """`twilio:<E.164>` (`twilio:whatsapp:<E.164>` on WhatsApp) of this account; a name from the allow list
    shows in prompts instead of the number. WhatsApp keeps its prefix: a number's WhatsApp account and its SMS
    can be different people's (a recycled number keeps the old owner's WhatsApp), so one never answers as the
    other."""
    return Principal(authenticator="twilio", issuer=f"twilio:{account_sid}", principal_type="user",
                     principal_id=f"twilio:{number}", attributes={"userName": name or number})
