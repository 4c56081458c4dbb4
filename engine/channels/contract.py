"""What a channel adapter implements, and the platform-free parts every text channel shares.

The engine drives delivery from events (`deliver(session_id)`); an adapter only knows how to show a
request, update it once it closed, say something, and tell a refused responder why. Text-only channels
(SMS, GitHub comments) show one request at a time (`one_at_a_time`: delivery shows the first open one only) and
`render_text()` writes it.

Inbound, a webhook reaches an adapter as a neutral `WebhookRequest` and is answered with a `WebhookReply`; what
the adapter makes of it is a typed inbound item (`Message`, `Answers`, `Choice`, `Ignored`), which it stores
through its `engine.channels.port.ChannelPort`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from engine.answers.edits import approved_with_changes
from engine.answers.options import text_label
from engine.policies import SessionInfo as SessionInfo  # what an adapter is told of the session it posts in
from engine.protocol import InputRequestOut, InputResponse, Principal, app_reason
from engine.store.statuses import Outcome as Outcome  # how a request it shows settled
from engine.store.statuses import RequestStatus as RequestStatus  # whether a request it shows is open


@dataclass(frozen=True)
class QueuePosition:
    """Where the shown request stands among the session's open ones: `index` of `total` (1-based)."""

    index: int
    total: int


@dataclass(frozen=True)
class Reminder:
    """The `count`th reminder (of at most `max`) of a request nobody answered yet. Whom it reminds: the request's
    requester (`requested_by`) and `approvers`, the principal ids its escalation added (a channel mentions those
    it can)."""

    count: int
    max: int | None
    approvers: tuple[str, ...] = ()


# -- webhooks: a neutral request and reply, and the typed inbound items an adapter parses them into ----------


@dataclass(frozen=True)
class WebhookRequest:
    """A platform's request to the gateway, framework-free: the path and query string as received (a signature
    may cover the URL), header names in lower case, the raw body (signatures cover it) and, for a form post,
    every value of every form field."""

    path: str
    headers: Mapping[str, str]
    body: bytes
    method: str = "POST"
    query: str = ""
    form: Mapping[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class WebhookReply:
    """What the gateway answers the platform: the status, the body and its headers (a name may repeat, as
    `set-cookie` does); the gateway turns it into its framework's response in one place."""

    status: int
    body: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @classmethod
    def json(cls, status: int, data: Any) -> WebhookReply:
        return cls(status, json.dumps(data), (("content-type", "application/json"),))


@dataclass(frozen=True)
class Message:
    """A message to the session at `address` (started there when there is none). `ref`: the platform's reference
    to the person's message, for a channel that acknowledges it (`Acknowledging`); `audit`: platform data kept
    beside the item for the audit trail only."""

    address: str
    text: str
    ref: str | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Answers:
    """Responses to requests (button clicks, select menus, modal submissions, commands); `ref` and `audit` as
    for a Message."""

    responses: tuple[InputResponse, ...]
    ref: str | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Choice:
    """Option number `position` (1-based, as shown) of a request. The option is looked up when the item is
    applied, so the webhook that stores it reads nothing."""

    request_id: str
    position: int
    ref: str | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Ignored:
    """Kept for the audit trail only, saying `why`; `ref` is acknowledged as `ignored`, and `notice` (the
    channel's own data: whom to tell what) goes to the channel's `notify` the first time an item carries a
    notice named `once` (e.g. once per person and place)."""

    why: str
    ref: str | None = None
    notice: Mapping[str, Any] | None = None
    once: str | None = None
    audit: Mapping[str, Any] = field(default_factory=dict)


InboundItem = Message | Answers | Choice | Ignored
"""What an adapter makes of a verified delivery; the engine stores it (engine.channels.inbound) and a job
applies it."""


def stored_item(item: InboundItem) -> dict[str, Any]:
    """The item as its `inbound.item` JSON (the shape rows have always had: `{"type": "message", "address",
    "text"}`, `{"type": "responses", "responses"}`, `{"type": "choice", "requestId", "position"}`, `{"type":
    "ignored", "why"}`, each with `ref`, `notice` and `once` when set, and the audit fields beside them)."""
    data: dict[str, Any]
    if isinstance(item, Message):
        data = {"type": "message", "address": item.address, "text": item.text}
    elif isinstance(item, Answers):
        data = {"type": "responses", "responses": [response.wire() for response in item.responses]}
    elif isinstance(item, Choice):
        data = {"type": "choice", "requestId": item.request_id, "position": item.position}
    else:
        data = {"type": "ignored", "why": item.why, "notice": dict(item.notice) if item.notice is not None else None,
                "once": item.once}
    data["ref"] = item.ref
    return {**{key: value for key, value in data.items() if value is not None}, **item.audit}


def read_item(data: Mapping[str, Any] | None) -> InboundItem | None:
    """A stored item as the typed item it is (its audit fields left out); None for none, or for a stored item
    that does nothing when applied (e.g. `{}`)."""
    data = data or {}
    ref, kind = data.get("ref"), data.get("type")
    if kind == "message":
        return Message(data["address"], data["text"], ref)
    if kind == "responses":
        return Answers(tuple(InputResponse.model_validate(r) for r in data["responses"]), ref)
    if kind == "choice":
        return Choice(data["requestId"], data["position"], ref)
    if kind == "ignored":
        return Ignored(data["why"], ref, data.get("notice"), data.get("once"))
    return None


SHOWN_EVENTS = frozenset({"assistant.message", "turn.failed", "approval.candidate", "input.requested",
                          "input.resolved", "input.reminded", "input.escalated"})
"""The events a channel shows (engine/channels/delivery.py `Delivery.handle`): a transaction that writes none of
them queues no delivery (engine/jobs/runtime.py), and the next delivery passes over them."""


class ChannelAdapter(Protocol):
    name: str
    one_at_a_time: bool
    update_edits: bool
    """`update()` edits the post its `ref` names in place (given one): repeating it shows nothing twice, so
    delivery does not commit its record before making the next post."""

    def address(self, data: dict[str, Any]) -> str:
        """The opaque session address (`"<channel>:<space>:<thread>"`) for an API-given place, e.g. Slack's
        `{channel, threadTs?}`; raises ValueError naming what is wrong."""
        ...

    def show(self, session: SessionInfo, request: InputRequestOut, position: QueuePosition) -> str | None:
        """Post a request; return the platform's reference to the post (Slack ts, Twilio sid, comment id), or
        None when nothing was posted (the address is unreachable): see engine.channels.contacts. Any post may raise
        ChannelUnavailable (try again later) or ChannelRefused (never)."""
        ...

    def update(self, session: SessionInfo, request: InputRequestOut, ref: str | None) -> None:
        """A shown request closed: remove its controls and say who answered (`ref` is what show returned)."""
        ...

    def say(self, session: SessionInfo, text: str) -> str | None:
        """Post an assistant message."""
        ...

    def refuse(self, session: SessionInfo, request: InputRequestOut, responder: Principal, reason: str) -> None:
        """Tell a responder the response policy refused them; the request stays open."""
        ...

    def remind(self, session: SessionInfo, request: InputRequestOut, ref: str, reminder: Reminder) -> str | None:
        """Remind the people a shown request (`ref`: what show returned) still waits for; return the platform's
        reference to the reminder (None: nothing was posted)."""
        ...


@runtime_checkable
class Acknowledging(Protocol):
    """Optional for an adapter: mark the message a person sent (GitHub: a reaction on their comment).

    An inbound item may carry `ref`, the platform's reference to that message; `process_inbound` then calls
    `acknowledge(ref, "received")` before applying the item, and once per status its responses got
    (`settled`, `pending`, `refused`, `stale`); an ignored item's ref hears `ignored` instead. A failure is
    logged: the item's effect has happened.
    """

    def acknowledge(self, ref: str, status: str) -> None: ...


@runtime_checkable
class Noticing(Protocol):
    """Optional for an adapter: tell a person why what they sent was kept but not acted on (GitHub: a commenter
    below GITHUB_MIN_PERMISSION). An inbound item of type `ignored` may carry `notice`, the adapter's own data;
    `process_inbound` acknowledges such an item's `ref` as `ignored` and passes the notice to `notify` once, after
    marking the item processed. A failure is logged, and the next ignored item with that notice tries again.
    """

    def notify(self, notice: Mapping[str, Any]) -> None: ...


@runtime_checkable
class Refreshing(Protocol):
    """Optional for an adapter whose posts can be edited: show an open request's prompt anew (`ref`: what show
    returned) when it changed while it waits: it escalated (Slack: the card says so)."""

    def refresh(self, session: SessionInfo, request: InputRequestOut, ref: str) -> None: ...


@runtime_checkable
class Reaching(Protocol):
    """Optional for an adapter that can write to one person on their own (a `{"person": ...}` place,
    engine/answers/places.py): Slack opens a DM with `conversations.open`, Twilio texts their number.
    `opens_direct`: whether `direct` asks the platform (Slack's DM is opened there): it is then called by a job
    after the request opened, never inside a transaction (engine/answers/places.py `show_direct`)."""

    opens_direct: bool

    def reaches(self, principal_id: str) -> bool:
        """Whether `principal_id` is one of this channel's principal ids that it can write to on its own; asks no
        platform."""
        ...

    def direct(self, principal_id: str) -> str:
        """The session address of a direct conversation with the person behind `principal_id`, one it `reaches`.
        ChannelUnavailable when the platform cannot answer now (asked again later); any other failure leaves the
        place out (logged)."""
        ...


@runtime_checkable
class Counting(Protocol):
    """Optional for an adapter: show how far an approval that takes several people got (engine/answers/quorum.py)
    where its prompt is shown (`ref`: what show returned): Slack updates the card, SMS and GitHub reply with the
    count. `request.approvals` holds it; `approvals.progress` says it (`1 of 2 approvals: Alice Ng`). `elsewhere`
    is the approver when the request is shown here besides its own session (show_to, escalation): a channel that
    replies then tells only an approver who answered here; None in the request's own session, which is always told.
    Returns the platform's reference to a reply, or None (an edit, or nothing posted)."""

    def progress(self, session: SessionInfo, request: InputRequestOut, ref: str,
                 elsewhere: Principal | None = None) -> str | None: ...


class ChannelUnavailable(Exception):
    """The platform cannot take this now (rate limited, down): the delivery job fails and is retried."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ChannelRefused(Exception):
    """The platform refused this post for good (the bot left the channel, the issue is gone, the token lost
    access): delivery logs it as an error, records the post as not made and goes on with the next event, so
    nothing is retried forever; the requests stay open for the other channels, the console and the API."""


# -- text rendering, shared by the text-only channels ------------------------------------------------------

def compact_input(data: dict[str, Any], limit: int = 160, marker: str = "…") -> str:
    """`key=value, ...` on one line, cut with a marker when long."""
    text = ", ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in data.items())
    return text if len(text) <= limit else text[: max(limit - len(marker), 0)] + marker


def option_lines(request: InputRequestOut) -> list[str]:
    lines = []
    for number, option in enumerate(request.options, start=1):
        label = text_label(option.id, option.label)
        lines.append(f"{number}. {label}" + (f" - {option.description}" if option.description else ""))
    return lines


def render_text(request: InputRequestOut, position: QueuePosition, how_to_answer: str,
                input_limit: int = 160, marker: str = "…") -> str:
    """A request as plain text: prompt, the call's input, numbered options, and how to answer."""
    head = request.prompt if position.total == 1 else f"({position.index} of {position.total}) {request.prompt}"
    lines = [head]
    if request.action is not None:
        lines.append(compact_input(request.action.input, input_limit, marker))
    lines.extend(option_lines(request))
    lines.append(how_to_answer)
    return "\n".join(lines)


def render_reminder(request: InputRequestOut, how_to_answer: str, limit: int = 160, marker: str = "…") -> str:
    """A reminder as plain text, one line: `Reminder: <prompt> <how to answer>` (the prompt cut to `limit`)."""
    prompt = request.prompt if len(request.prompt) <= limit else request.prompt[: max(limit - len(marker), 0)] + marker
    return f"Reminder: {prompt} {how_to_answer}"


def render_progress(request: InputRequestOut, limit: int = 60, marker: str = "…") -> str:
    """How far an approval that takes several people got, one line: `1 of 2 approvals: Alice Ng for "Approve
    refund?"; 1 more needed.` (the prompt cut to `limit`)."""
    approvals = request.approvals
    assert approvals is not None
    prompt = request.prompt if len(request.prompt) <= limit else request.prompt[: max(limit - len(marker), 0)] + marker
    more = approvals.need - approvals.have
    return f"{approvals.progress} for \"{prompt}\"; {more} more needed."


def render_settled(request: InputRequestOut) -> str:
    """One line naming the outcome and who answered."""
    who = request.responder.display_name if request.responder else None
    note = (request.response or {}).get("text")
    labels = {o.id: o.label for o in request.options}
    if request.outcome == Outcome.APPROVED:
        reason = app_reason(request.responder)
        if reason:
            return f"{reason.capitalize()}."
        if request.approvals is not None:
            who = ", ".join(approver.name for approver in request.approvals.by)
        changes = (request.response or {}).get("changes")
        return (approved_with_changes(str(who), changes) if changes else f"Approved by {who}") + "."
    if request.outcome == Outcome.DENIED:
        return f"Denied by {who}" + (f": {note}" if note else ".")
    if request.outcome == Outcome.ANSWERED:
        option = (request.response or {}).get("optionId")
        answer = labels.get(option, option) if option else note
        return f"Answered: {answer} (by {who})."
    if request.outcome == Outcome.EXPIRED:
        return "Expired: nobody answered in time."
    return "No longer needed."
