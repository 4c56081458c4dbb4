"""`TwilioChannel`: SMS as a text-only channel, one request at a time, one session per (our number, theirs).
WhatsApp is the same channel with `whatsapp:+E.164` numbers on both sides (its own sessions and principals).

Outbound (delivery jobs): prompts, confirmations, assistant messages and refusals go out through
`messages.create`, unless the number opted out (engine.channels.contacts). Inbound (`receive`, behind the gateway's
`POST /twilio/sms`): verify, admit only allowed senders, dedupe on (AccountSid, MessageSid), handle the
keywords Twilio acts on itself, and store anything else as a message for the (From, To) session.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from twilio.twiml.messaging_response import MessagingResponse

from engine.answers.options import typed_response
from engine.channels.contract import (
    Answers,
    ChannelUnavailable,
    Ignored,
    Message,
    QueuePosition,
    Reminder,
    RequestStatus,
    SessionInfo,
    WebhookReply,
    WebhookRequest,
)
from engine.channels.port import ChannelPort
from engine.protocol import InputRequestOut, Principal

from .client import TWILIO_API, SmsClient
from .errors import TwilioApiError, TwilioOptedOut, TwilioRefused, TwilioSenderRefused, TwilioVerificationError
from .parse import TWILIO_NUMBER, WHATSAPP, Keyword, TwilioInbound, is_whatsapp, parse_twilio_form, twilio_principal
from .render import (
    render_confirmation,
    render_message,
    render_progress_sms,
    render_prompt,
    render_refusal,
    render_reminder_sms,
)
from .verify import public_url, verify_twilio_signature

log = logging.getLogger(__name__)

EMPTY_TWIML = str(MessagingResponse())
IDEMPOTENCY_HEADER = "i-twilio-idempotency-token"


@dataclass(frozen=True)
class TwilioConfig:
    account_sid: str
    auth_token: str
    sender: str
    """`TWILIO_FROM`: our number, our WhatsApp sender (`whatsapp:+...`), or a Messaging Service SID (`MG...`)."""
    public_base_url: str
    allow_from: Mapping[str, str | None] = field(default_factory=dict)
    """Numbers that may text us -> their display names (None: show the number)."""
    api_url: str = TWILIO_API


SESSION_ADDRESS = re.compile(r"^twilio:((?:whatsapp:)?[^:]+):((?:whatsapp:)?[^:]+)$")


def session_address(ours: str, theirs: str) -> str:
    return f"twilio:{ours}:{theirs}"


def split_address(address: str) -> tuple[str, str]:
    """(our number or Messaging Service SID, their number) of a `twilio:<ours>:<theirs>` address; on WhatsApp
    the numbers keep their `whatsapp:` prefix (`twilio:whatsapp:+1555...:whatsapp:+1555...`)."""
    match = SESSION_ADDRESS.match(address)
    if match is None:
        raise ValueError(f"not a Twilio address: {address!r}")
    return match[1], match[2]


class TwilioChannel:
    name = "twilio"
    update_edits = False
    one_at_a_time = True
    opens_direct = False

    def __init__(self, config: TwilioConfig, client: SmsClient | None = None) -> None:
        self.config = config
        self.client = client or SmsClient(config.account_sid, config.auth_token, config.api_url)
        self.port: ChannelPort | None = None

    def attach(self, port: ChannelPort) -> None:
        """The engine's side, for posts: whether a number opted out (engine.channels.port.Attaching)."""
        self.port = port

    def address(self, data: dict[str, Any]) -> str:
        """`{to: "+15551230001"}`: the session texts its requests to that number, from `TWILIO_FROM`;
        `{to: "whatsapp:+15551230001"}` writes to that WhatsApp number, from a WhatsApp `TWILIO_FROM` (or a
        Messaging Service, which may hold both)."""
        to = data.get("to")
        if set(data) != {"to"} or not isinstance(to, str) or not TWILIO_NUMBER.match(to):
            raise ValueError('a Twilio address is {"to": "<E.164 number, like +15551230001>"}, '
                             'or {"to": "whatsapp:+15551230001"} for WhatsApp')
        sender = self.config.sender
        if is_whatsapp(sender) and not is_whatsapp(to):
            raise ValueError(f'TWILIO_FROM is a WhatsApp sender ({sender}): the address is {{"to": "whatsapp:{to}"}}')
        if is_whatsapp(to) and not is_whatsapp(sender) and not sender.startswith("MG"):
            raise ValueError(f"TWILIO_FROM ({sender}) sends SMS: writing to {to} takes a WhatsApp sender, "
                             f"TWILIO_FROM={WHATSAPP}+E.164, or a Messaging Service (MG...) with one")
        return session_address(sender, to)

    def reaches(self, principal_id: str) -> bool:
        """Whether `principal_id` is a number TWILIO_FROM can write to: `twilio:<number>` (on WhatsApp,
        `twilio:whatsapp:<number>`)."""
        try:
            self.direct(principal_id)
        except ValueError:
            return False
        return True

    def direct(self, principal_id: str) -> str:
        """The session that texts `twilio:<number>` from TWILIO_FROM (asks no platform); ValueError for another
        channel's principal id, or a number TWILIO_FROM cannot write to."""
        authenticator, _, number = principal_id.partition(":")
        if authenticator != self.name:
            raise ValueError(f"{principal_id} is not a phone number's principal id")
        return self.address({"to": number})

    # -- outbound, from delivery jobs ------------------------------------------------------------------

    def show(self, session: SessionInfo, request: InputRequestOut, position: QueuePosition) -> str | None:
        _, theirs = split_address(session.address)
        return self.send(session, render_prompt(request, position, whatsapp=is_whatsapp(theirs)))

    def update(self, session: SessionInfo, request: InputRequestOut, ref: str | None) -> None:
        self.send(session, render_confirmation(request))

    def say(self, session: SessionInfo, text: str) -> str | None:
        return self.send(session, render_message(text))

    def remind(self, session: SessionInfo, request: InputRequestOut, ref: str, reminder: Reminder) -> str | None:
        """A short text: "Reminder: <prompt> Reply 1 or 2 ..." (the prompt shown is the one on the phone)."""
        _, theirs = split_address(session.address)
        return self.send(session, render_reminder_sms(request, whatsapp=is_whatsapp(theirs)))

    def progress(self, session: SessionInfo, request: InputRequestOut, ref: str,
                 elsewhere: Principal | None = None) -> str | None:
        """Text the count of an approval that takes several people: "1 of 2 approvals: Alice Ng ...", in the
        request's own conversation, and at another place only to an approver who answered from this number."""
        if elsewhere is not None and not self.answered_here(session, elsewhere):
            return None
        return self.send(session, render_progress_sms(request))

    def refuse(self, session: SessionInfo, request: InputRequestOut, responder: Principal, reason: str) -> None:
        """Text the refusal to a responder who answered from this number (by SMS, or this WhatsApp); one who
        answered elsewhere was told there."""
        if self.answered_here(session, responder):
            self.send(session, render_refusal(request, reason))

    def answered_here(self, session: SessionInfo, responder: Principal) -> bool:
        """Whether `responder` answered from the number this session texts (by SMS, or this WhatsApp)."""
        _, theirs = split_address(session.address)
        return responder.authenticator == self.name and responder.principal_id == f"twilio:{theirs}"

    def send(self, session: SessionInfo, body: str) -> str | None:
        """The message's sid, or None when the number opted out (then nothing is sent, and nothing retried).
        Raises TwilioRefused (a ChannelRefused) when Twilio refuses the message for good."""
        if self.port is None:
            raise RuntimeError("the Twilio channel posts once attached to a runtime (gateway.compose attaches it)")
        if not self.port.is_reachable(session.address):
            log.info("not texting %s: the number opted out", session.address)
            return None
        ours, theirs = split_address(session.address)
        try:
            return self.client.send(ours, theirs, body)
        except TwilioOptedOut:
            log.info("%s opted out (Twilio error 21610): marked unreachable", session.address)
            self.port.set_reachable(session.address, False)
            return None
        except TwilioRefused:
            raise
        except TwilioApiError as exc:
            raise ChannelUnavailable(str(exc)) from exc

    # -- inbound, from the gateway's webhook ------------------------------------------------------------

    def receive(self, port: ChannelPort, webhook: WebhookRequest) -> WebhookReply:
        """Handle one incoming SMS or WhatsApp message and answer Twilio at once with empty TwiML (replies go
        out from jobs).

        Raises TwilioVerificationError (not signed by Twilio for this account), TwilioParseError (signed but
        not an incoming message) or TwilioSenderRefused (a number outside the allow list): all without effect.
        """
        url = public_url(self.config.public_base_url, webhook.path, webhook.query)
        verify_twilio_signature(self.config.auth_token, url, webhook.form, webhook.headers)
        message = parse_twilio_form(webhook.form)
        if message.account_sid != self.config.account_sid:
            raise TwilioVerificationError(f"a message for account {message.account_sid}, not ours")
        if message.sender not in self.config.allow_from:
            raise TwilioSenderRefused(f"{message.sender} is not in TWILIO_ALLOW_FROM")
        principal = twilio_principal(message.account_sid, message.sender, self.config.allow_from[message.sender])
        address = self.inbound_address(message)
        external_id = f"{message.account_sid}:{message.message_sid}"
        audit = {"messageSid": message.message_sid, "idempotencyToken": webhook.headers.get(IDEMPOTENCY_HEADER)}
        keyword = message.keyword
        if keyword is None and message.body.strip():
            port.accept(external_id, principal, webhook.body, self.reply_item(port, address, message.body, audit))
        else:  # kept for the audit trail; never an answer, never a message to the agent
            item = Ignored(keyword.value if keyword else "no text", audit=audit)
            fresh = port.accept(external_id, principal, webhook.body, item)
            if fresh and keyword in (Keyword.OPT_OUT, Keyword.OPT_IN):
                port.set_reachable(address, keyword is Keyword.OPT_IN)
        return WebhookReply(200, EMPTY_TWIML, (("content-type", "text/xml"),))

    def reply_item(self, port: ChannelPort, address: str, text: str, audit: Mapping[str, Any]) -> Answers | Message:
        """A message to the (From, To) session: it answers the prompt on the phone's screen, the last one texted.
        When that prompt closed meanwhile (answered elsewhere, expired) and the request now first is not texted
        yet (or cannot be: STOP), a pick of the prompt's options is a late answer to it, never an answer to the
        request the person has not seen. `audit`: the delivery's ids, kept beside the item."""
        shown = port.shown_requests(address, limit=1)
        if shown and shown[0][1].status != RequestStatus.PENDING:
            prompt = shown[0][1]
            pick = typed_response(prompt, text, allow_freeform=False)
            if pick is not None and port.has_pending(prompt.session_id):
                return Answers((pick,), audit=audit)
        return Message(address, text, audit=audit)

    def inbound_address(self, message: TwilioInbound) -> str:
        """The (From, To) session: `To` is ours, or our Messaging Service when it is `TWILIO_FROM`, so a reply
        reaches the session that texted from that service."""
        ours = self.config.sender if message.messaging_service_sid == self.config.sender else message.to
        return session_address(ours, message.sender)
