"""Request policies (does this call need a person?) and response policies (may this person settle it?)."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property
from typing import Any, Literal, Protocol

from engine.answers.edits import input_grant
from engine.answers.schedules import Schedule, Seconds, schedule
from engine.answers.showing import Showing, showing
from engine.channels.groups import platform_kind
from engine.errors import GroupLookupFailed
from engine.llm import ChatModel
from engine.people import Person
from engine.protocol import InputRequestOut, Principal

log = logging.getLogger(__name__)

Decision = Literal["not-applicable", "user-approval", "approved", "denied"]


@dataclass(frozen=True)
class SessionInfo:
    id: str
    agent: str
    channel: str
    address: str
    initiator: Principal | None


@dataclass(frozen=True)
class ApprovalContext:
    """What a request policy sees about one proposed call."""

    session: SessionInfo
    tool_name: str
    tool_input: dict[str, Any]
    call_id: str
    approval_key: str
    grants: Callable[[], frozenset[str]] = field(repr=False, compare=False)
    """Reads `approved_keys`, only for a policy that looks at them."""

    @cached_property
    def approved_keys(self) -> frozenset[str]:
        """The approval keys approved for the rest of this session (and not waiting on a person again); an
        approval a person edited grants `<key>#input:<digest>`, which covers its approved input only."""
        return self.grants()


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str | None = None


def call_policy(fn: Callable[..., Any], *args: Any, timeout: float | None = None) -> Any:
    """Call a sync or async policy callable and return its value; an async one is cut off after `timeout`
    seconds (TimeoutError; a sync one cannot be)."""
    result = fn(*args)
    if inspect.isawaitable(result):
        return asyncio.run(_awaited(result, timeout))
    return result


async def _awaited(awaitable: Any, timeout: float | None) -> Any:
    return await asyncio.wait_for(awaitable, timeout)


def to_verdict(status: Any) -> Verdict:
    """Every status form of DESIGN.md rule 1, normalised."""
    if status is True:
        return Verdict("user-approval")
    if status is False or status is None:
        return Verdict("not-applicable")
    if isinstance(status, str) and status in ("not-applicable", "user-approval", "approved", "denied"):
        return Verdict(status)  # type: ignore[arg-type]
    if isinstance(status, dict) and status.get("type") in ("approved", "denied"):
        reason = status.get("reason")
        return Verdict(status["type"], str(reason) if reason is not None else None)
    raise ValueError(f"a request policy returned {status!r}, which is not a status")


class RequestPolicy:
    """Base of the helpers; any callable `(ApprovalContext) -> status` is a request policy too.

    `expires_in` (seconds or a timedelta): an approval nobody settles in time resolves `expired`, as if denied.
    """

    def __init__(self, *, expires_in: float | timedelta | None = None) -> None:
        self.expires_in = expires_in

    def __call__(self, ctx: ApprovalContext) -> Any:
        raise NotImplementedError


def expiry(expires_in: float | timedelta | None, now: datetime) -> datetime | None:
    """When a request opened at `now` expires."""
    if expires_in is None:
        return None
    delta = expires_in if isinstance(expires_in, timedelta) else timedelta(seconds=float(expires_in))
    if delta <= timedelta(0):
        raise ValueError("expires_in must be positive")
    return now + delta


class never(RequestPolicy):  # noqa: N801 - the public helpers read as words
    """No approval: the call runs at once."""

    def __call__(self, ctx: ApprovalContext) -> Any:
        return "not-applicable"


class always(RequestPolicy):  # noqa: N801
    """Every call waits for a person."""

    def __call__(self, ctx: ApprovalContext) -> Any:
        return "user-approval"


class once(RequestPolicy):  # noqa: N801
    """The first call waits for a person; after an explicit approve, calls with the same key run (after an
    approve with an edited input, calls with exactly that input)."""

    def __call__(self, ctx: ApprovalContext) -> Any:
        keys = ctx.approved_keys
        granted = ctx.approval_key in keys or input_grant(ctx.approval_key, ctx.tool_input) in keys
        return "approved" if granted else "user-approval"


REVIEW_INSTRUCTIONS = (
    "You review one tool call an AI agent wants to make. Answer with JSON only: "
    '{"verdict": "clear" | "caution" | "deny", "reason": "..."}. '
    "clear: safe to run without a person. caution: a person must decide. deny: must not run."
)


class auto(RequestPolicy):  # noqa: N801
    """A reviewer model decides; a review failure or an unparsable verdict asks a person."""

    def __init__(self, model: ChatModel, instructions: str = "", criteria: list[str] | None = None, *,
                 expires_in: float | timedelta | None = None) -> None:
        super().__init__(expires_in=expires_in)
        self.model = model
        self.instructions = instructions
        self.criteria = list(criteria or [])

    def __call__(self, ctx: ApprovalContext) -> Any:
        system = "\n".join(
            [REVIEW_INSTRUCTIONS, self.instructions, *(f"- {criterion}" for criterion in self.criteria)]
        )
        call = json.dumps({"tool": ctx.tool_name, "input": ctx.tool_input}, sort_keys=True)
        messages = [{"role": "system", "content": system.strip()}, {"role": "user", "content": call}]
        try:
            reply = self.model.complete(messages, [])
            verdict = json.loads(reply.text or "")
            kind, reason = verdict["verdict"], verdict.get("reason")
        except Exception:  # any reviewer failure means a person decides
            log.warning("auto() review of %s failed; asking a person", ctx.tool_name, exc_info=True)
            return "user-approval"
        if kind == "clear":
            return {"type": "approved", "reason": reason}
        if kind == "deny":
            return {"type": "denied", "reason": reason}
        return "user-approval"


@dataclass(frozen=True)
class ResponseInfo:
    """One response as a policy sees it: the chosen option (`approve`, `deny`, a question's option), text,
    and the input an approve edited (None: approved as proposed)."""

    responder: Principal
    option_id: str | None
    text: str | None
    input: dict[str, Any] | None = None

    @property
    def decision(self) -> str | None:
        """`approve` / `deny` for an approval, the option id for a question (None for free text)."""
        return self.option_id


class Directory(Protocol):
    """Who is who, for a response policy (engine/answers/directory.py): the people and groups `approvers` names."""

    def members(self, who: Iterable[str]) -> frozenset[str]:
        """The principal ids of everyone `who` names (principal ids, `person:`, `group:`, `slack-usergroup:`,
        `github-team:` items); GroupLookupFailed (engine/channels/groups.py) when a platform group's members
        cannot be had."""
        ...

    def same_person(self, principal_id: str) -> frozenset[str]:
        """Every principal id of the person `principal_id` belongs to (only itself when it is nobody's)."""
        ...


@dataclass(frozen=True)
class ResponseContext:
    """What a response policy sees about one response to a request."""

    request: InputRequestOut
    response: ResponseInfo
    session: SessionInfo
    earlier: Callable[[], list[ResponseInfo]] = field(default=list, repr=False, compare=False)
    """Reads `candidates`, only for a policy that looks at them."""
    responder_person: Person | None = None
    """The person the responder's principal is linked to (engine/people.py), None when it is nobody's."""
    requester_person_of: Callable[[], Person | None] = field(default=lambda: None, repr=False, compare=False)
    """Reads `requester_person`, only for a policy that looks at it."""
    directory: Directory | None = field(default=None, repr=False, compare=False)
    """Who is who (people, groups, platform groups); None: principal ids stand only for themselves."""

    @cached_property
    def requester_person(self) -> Person | None:
        """The person the requester's principal is linked to, None when it is nobody's (or nobody asked)."""
        return self.requester_person_of()

    def is_one_of(self, who: Iterable[str]) -> bool:
        """Whether the responder is one of the people `who` names (any principal of their person counts);
        GroupLookupFailed when a platform group in it cannot be looked up."""
        responder = self.response.responder.principal_id
        if self.directory is None:
            return responder in who
        return not self.directory.same_person(responder).isdisjoint(self.directory.members(who))

    @cached_property
    def candidates(self) -> list[ResponseInfo]:
        """The earlier responses to this request still pending (a two-person rule counts them)."""
        return self.earlier()


ResponsePolicy = Callable[[ResponseContext], Any]


def answered_by_requesters_person(ctx: ResponseContext) -> bool:
    """Whether the responder is the person who asked: two principals of one person count as that person."""
    return ctx.responder_person is not None and ctx.responder_person == ctx.requester_person


def requester_only(ctx: ResponseContext) -> dict[str, str]:
    """The default response policy: the requester (any principal of the requester's person) or an operator;
    anyone verified when the requester was anonymous."""
    responder = ctx.response.responder
    requester = ctx.request.requested_by
    if responder.authenticator == "operator":
        return {"status": "allowed"}
    if requester is None or requester.same_as(responder) or answered_by_requesters_person(ctx):
        return {"status": "allowed"}
    return {"status": "rejected", "reason": f"only {requester.display_name} may answer this request"}


class approvers:  # noqa: N801 - a response policy, read as a word like the request policies
    """A response policy: the people `who` names may settle, and an approval takes `quorum` distinct people.

    `who` items: a principal id (`slack:T1:U1`, `twilio:+15551230001`, `github:1001`, an API key's `alice`),
    `person:<name>`, `group:<name>` (the gateway's people and groups), `slack-usergroup:<id>` (or
    `slack-usergroup:<team>:<id>`) and `github-team:<org>/<slug>` (members looked up on the platform, kept at most
    five minutes; a lookup that fails refuses, with the reason). A person's principals count as that person. An
    operator always may. With nobody named, anyone the session's place admits may: the people its channel's
    webhooks verify (a Slack workspace's users, the texted number, GitHub users at the permission floor), or, in
    the console, the API and the CLI (channel `api`), API keys' holders. An external request with `approvers` is
    judged by this policy.

    Quorum (engine/answers/quorum.py): an approve this policy allows settles the request once `quorum` distinct
    people approved it; until then it is a `pending` candidate counted toward it ("1 of 2"). Anyone's deny it
    allows settles the request denied at once."""

    def __init__(self, *who: str | Iterable[str], quorum: int = 1) -> None:
        items: list[str] = []
        for item in who:
            items.extend([item] if isinstance(item, str) else item)
        self.who = tuple(dict.fromkeys(items))
        if isinstance(quorum, bool) or not isinstance(quorum, int) or quorum < 1:
            raise ValueError(f"quorum is a whole number of people, at least 1, not {quorum!r}")
        self.quorum = quorum

    @property
    def looks_up(self) -> bool:
        """Whether judging asks a platform for a group's members (so it runs outside any transaction)."""
        return any(platform_kind(item) for item in self.who)

    def __call__(self, ctx: ResponseContext) -> dict[str, str]:
        responder = ctx.response.responder
        if responder.authenticator == "operator":
            return {"status": "allowed"}
        if self.who:
            try:
                if ctx.is_one_of(self.who):
                    return {"status": "allowed"}
            except GroupLookupFailed as exc:
                return {"status": "rejected", "reason": str(exc)}
            return {"status": "rejected", "reason": f"only {' or '.join(self.who)} may answer this request"}
        place = ctx.session.channel
        if responder.authenticator == ("api-key" if place == "api" else place):
            return {"status": "allowed"}
        where = "the console or the API" if place == "api" else place
        return {"status": "rejected", "reason": f"this request is answered on {where}"}


def judged_at_once(policy: ResponsePolicy) -> bool:
    """The default policy and `approvers` only compare principals (and read the gateway's people and groups), and
    so does an escalation's list of approvers (`escalated`, over one of those): they are judged in the transaction
    that stores their candidates. Any other policy may take its time (and so may `approvers` naming a platform
    group: the platform is asked), so it runs outside any transaction."""
    if isinstance(policy, escalated):
        return judged_at_once(policy.base)
    return policy is requester_only or (isinstance(policy, approvers) and not policy.looks_up)


@dataclass(frozen=True)
class escalated:  # noqa: N801 - a response policy, read as a word like the request policies
    """The response policy of an escalated request: the escalation's approvers (principal ids; any principal of
    their person too) may settle it too; anyone else is judged by the request's own policy (`base`), so its first
    approvers keep their right."""

    base: ResponsePolicy
    principal_ids: frozenset[str]

    def __call__(self, ctx: ResponseContext) -> Any:
        person = ctx.responder_person
        if ctx.response.responder.principal_id in self.principal_ids \
                or (person is not None and not self.principal_ids.isdisjoint(person.principals)):
            return {"status": "allowed"}
        return self.base(ctx)


def need_of(policy: ResponsePolicy) -> int:
    """How many distinct people must approve under `policy`: an `approvers` policy's quorum (an escalation keeps
    its request's), else 1."""
    if isinstance(policy, escalated):
        return need_of(policy.base)
    return policy.quorum if isinstance(policy, approvers) else 1


@dataclass(frozen=True)
class ApprovalPolicy:
    """Both halves at once: `request` (does a call need a person?) and `response` (who may settle it?).
    `editable`: the person may approve the call with another input, which must fit the tool's. What happens while
    nobody answers (docs/reminders-and-timeouts.md): reminders every `remind_every` seconds (at most
    `remind_max`), an escalation after `escalate_after` seconds (shown at `escalate_to` too, and settled by
    `escalate_approvers` too), and what expiry (the request policy's `expires_in`) means: `on_timeout` `deny` (the
    default) or `approve`. Where it is shown (docs/right-people.md): at `show_to` places too (a channel address,
    `{"person": name}` or `{"group": name}`, or a list), and in the session's own channel unless
    `show_in_session=False`."""

    request: Callable[[ApprovalContext], Any] = field(default_factory=always)
    response: ResponsePolicy | None = None
    editable: bool = False
    remind_every: Seconds | None = None
    remind_max: int | None = None
    escalate_after: Seconds | None = None
    escalate_to: Any = None
    escalate_approvers: list[str] | tuple[str, ...] | None = None
    on_timeout: str | None = None
    show_to: Any = None
    show_in_session: bool = True
    schedule: Schedule = field(init=False, repr=False, compare=False)
    shown: Showing = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "shown", showing(self.show_to, self.show_in_session))
        object.__setattr__(self, "schedule", schedule(
            "tool-approval", remind_every=self.remind_every, remind_max=self.remind_max,
            escalate_after=self.escalate_after, escalate_to=self.escalate_to,
            escalate_approvers=self.escalate_approvers, on_timeout=self.on_timeout))
