"""Incoming SMS: the form Twilio posts, the keywords Twilio acts on itself, the allow list, the principal."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from enum import Enum

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.protocol import Principal

from .errors import TwilioParseError

E164 = re.compile(r"^\+[1-9][0-9]{1,14}$")
MESSAGING_SERVICE = re.compile(r"^MG[0-9a-fA-F]{32}$")


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
    sender: str = Field(alias="From", pattern=E164.pattern)
    to: str = Field(alias="To", min_length=1)
    body: str = Field("", alias="Body")
    messaging_service_sid: str | None = Field(None, alias="MessagingServiceSid")

    @property
    def keyword(self) -> Keyword | None:
        """STOP/START/HELP words count only as the whole message (trimmed, any case), as Twilio reads them."""
        return KEYWORDS.get(self.body.strip().upper())


def parse_twilio_form(form: Mapping[str, list[str]]) -> TwilioInbound:
    try:
        return TwilioInbound.model_validate({name: values[0] for name, values in form.items() if values})
    except ValidationError as exc:
        raise TwilioParseError(f"not an incoming message: {exc.error_count()} field(s) missing or wrong") from exc


def parse_allow_list(entries: Iterable[str]) -> dict[str, str | None]:
    """`TWILIO_ALLOW_FROM` entries, `+15551230001` or `alice=+15551230001`: number -> display name."""
    allowed: dict[str, str | None] = {}
    for entry in entries:
        name, _, number = entry.rpartition("=")
        if not E164.match(number.strip()):
            raise ValueError(f"TWILIO_ALLOW_FROM entries are E.164 numbers (name=+15551230001), not {entry!r}")
        allowed[number.strip()] = name.strip() or None
    return allowed


def twilio_principal(account_sid: str, number: str, name: str | None = None) -> Principal:
    """`twilio:<E.164>` of this account; a name from the allow list shows in prompts instead of the number."""
    return Principal(authenticator="twilio", issuer=f"twilio:{account_sid}", principal_type="user",
                     principal_id=f"twilio:{number}", attributes={"userName": name or number})
