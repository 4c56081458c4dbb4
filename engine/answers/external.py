"""External requests (DESIGN.md section 10): InputRequests an agent running elsewhere makes (POST /api/requests).

An external request lives in a session like any other; no turn waits on it. Everything after it opens is the code
path of an agent's request: its `input.requested` event shows it where its session lives (buttons and menus on
Slack, one at a time and numbered on SMS and GitHub), responses are candidates judged by a response policy (its
`approvers`, engine/policies.py), it settles once by compare-and-set, and it expires by the sweep. Settling it
closes it and makes its callback due (engine/jobs/callbacks.py); an event stream or a long-poll sees it close.

* Place: with a channel and an address, it joins the session a message there reaches (the latest at that
  address), so it is shown in order with the place's other requests and a typed reply there answers it when it
  is first; the agent opens one there (as its initiator) when the place has none. Without a place it gets a
  session of its own on `api`: the console, the API and the CLI answer it.
* More places: `to` as a list (or a person or a group) shows it at every other place too, as an agent's
  `show_to` does (engine/answers/places.py); it settles once, and every place updates.
* Time: its reminders, escalation and on_timeout are an agent's request's (engine/answers/timers.py,
  docs/reminders-and-timeouts.md); approved on timeout, its callback hears the app's approval.
* Edits: an editable approval may be approved with another input, checked against its `action.inputSchema`
  (a JSON Schema; engine/answers/edits.py `schema_problems`), as an in-process tool's is against its input model.
* Platform groups: a request whose approvers name one gets a job that looks its members up once it opened
  (engine/channels/groups.py), so they see it in their lists before anyone answers.
* Idempotency: a key is the requester's own. The same key again finds the request it made (whatever became of
  it), unless the body differs: IdempotencyConflict, and nothing changes.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as DbSession

from engine.answers.input_requests import open_request
from engine.answers.options import APPROVE, DENY
from engine.answers.places import announce
from engine.answers.schedules import NO_SCHEDULE, Schedule
from engine.answers.settlement import close_request
from engine.answers.showing import IN_SESSION, Showing
from engine.channels.groups import platform_kind
from engine.errors import Conflict, IdempotencyConflict, InvalidInput, NotFound, NotPermitted, RequestClosed
from engine.jobs.runtime import Runtime
from engine.jobs.webhooks import WebhookRefused, check_url
from engine.policies import ResponseContext, approvers, expiry
from engine.protocol import Principal
from engine.store.queries import get_request
from engine.store.statuses import CallbackStatus, Outcome
from engine.store.storage import new_id, principal_digest
from engine.store.tables import ExternalRequest, InputRequest, RequestApprover, RequestPlace, Session
from engine.turns.sessions import insert_session, session_at
from engine.turns.transitions import lock_session

ANY_OBJECT: dict[str, Any] = {"type": "object"}
"""The input schema of an editable external request that gave none: any JSON object."""
_APPROVERS = select(RequestApprover.principal_id).where(RequestApprover.request_id == bindparam("request"))
_QUORUM = select(ExternalRequest.quorum).where(ExternalRequest.request_id == bindparam("request"))
_PLACE_CHANNELS = select(Session.channel).join(RequestPlace, RequestPlace.session_id == Session.id) \
    .where(RequestPlace.request_id == bindparam("request"))
"""Built once (see turns/transitions.py)."""


@dataclass(frozen=True)
class Place:
    """Where a request is shown: a configured channel and the session address its adapter made of the API's."""

    channel: str
    address: str


@dataclass(frozen=True)
class NewRequest:
    """A validated POST /api/requests body. Approvals: `tool_name` and `tool_input`, and `editable` (approved with
    another input, which must fit `input_schema`: any JSON object when None); questions: `options` (each
    `{id, label, description?}`) or none, and `allow_freeform`."""

    kind: Literal["tool-approval", "question"]
    prompt: str | None = None
    tool_name: str | None = None
    tool_input: dict[str, Any] | None = None
    editable: bool = False
    input_schema: dict[str, Any] | None = None
    options: list[dict[str, Any]] = field(default_factory=list)
    allow_freeform: bool = False
    place: Place | None = None
    approvers: list[str] = field(default_factory=list)
    """Who may settle it (`approvers(*who)` items, engine/policies.py); none: anyone its place admits."""
    quorum: int = 1
    """How many distinct people must approve it."""
    expires_in: int | None = None
    idempotency_key: str | None = None
    callback_url: str | None = None
    metadata: dict[str, Any] | None = None
    schedule: Schedule = NO_SCHEDULE
    """Its reminders, escalation and what its expiry means (engine/answers/schedules.py)."""
    shown: Showing = IN_SESSION
    """The places besides `place` that show it (engine/answers/places.py)."""

    def digest(self) -> str:
        """What makes two requests with one idempotency key the same request: everything but the key."""
        body = {key: value for key, value in asdict(self).items()
                if key != "idempotency_key" and (key, value) != ("quorum", 1)}  # (as before quorums were asked)
        return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


@dataclass(frozen=True)
class Opened:
    """The request as GET /api/requests/<id> shows it, and whether this call made it (not an earlier one)."""

    request: dict[str, Any]
    created: bool


def open_external_request(rt: Runtime, requester: Principal, new: NewRequest) -> Opened:
    """Open an external request for `requester`, or find the one its idempotency key made. InvalidInput (naming
    the field) for a callback URL that may not be called; IdempotencyConflict for a key used with another body."""
    if new.callback_url is not None:
        check_callback(rt, new.callback_url)
    digest = principal_digest(requester.wire())
    assert digest is not None
    try:
        with rt.transaction() as db:
            found = made_before(db, digest, new)
            request_id = found or create(rt, db, requester, digest, new)
    except IntegrityError:  # the same key at the same moment: the other transaction made it
        with rt.db.read() as db:
            found = made_before(db, digest, new)
        if found is None:
            raise
        request_id = found
    return Opened(get_request(rt, request_id), found is None)


def external_policy(db: DbSession, request: InputRequest) -> approvers | None:
    """An external request's response policy, with its quorum: its approvers, or, without approvers, anyone one
    of its places admits (its session's, or another that shows it: `admitted_at`); None for an agent's."""
    if request.turn_id is not None:
        return None
    who = sorted(db.execute(_APPROVERS, {"request": request.request_id}).scalars())
    quorum = db.execute(_QUORUM, {"request": request.request_id}).scalar_one() or 1
    if who:
        return approvers(*who, quorum=quorum)
    channels = frozenset(db.execute(_PLACE_CHANNELS, {"request": request.request_id}).scalars())
    return admitted_at(channels, quorum=quorum) if channels else approvers(quorum=quorum)


class admitted_at(approvers):  # noqa: N801 - a response policy, read as a word like the others
    """`approvers()` (anyone the session's place admits) for a request also shown at places of other channels:
    anyone those channels admit too (a person it was shown to, by SMS, answers from their phone)."""

    def __init__(self, channels: frozenset[str], quorum: int = 1) -> None:
        super().__init__(quorum=quorum)
        self.channels = channels

    def __call__(self, ctx: ResponseContext) -> dict[str, str]:
        verdict = super().__call__(ctx)
        if verdict["status"] != "allowed" and ctx.response.responder.authenticator in self.channels:
            return {"status": "allowed"}
        return verdict


def check_callback(rt: Runtime, url: str) -> None:
    if rt.callback_key is None:
        raise InvalidInput("callbackUrl needs HITL_CALLBACK_SECRET set on the gateway, to sign its callbacks",
                           {"field": "callbackUrl"})
    try:
        check_url(url, rt.callback_hosts)
    except WebhookRefused as exc:
        raise InvalidInput(f"callbackUrl cannot be called: {exc}", {"field": "callbackUrl"}) from None


def made_before(db: DbSession, digest: str, new: NewRequest) -> str | None:
    """The request the requester made with this idempotency key, if any (IdempotencyConflict: another body)."""
    if new.idempotency_key is None:
        return None
    found = db.execute(select(ExternalRequest.request_id, ExternalRequest.body_digest).where(
        ExternalRequest.requester_digest == digest, ExternalRequest.idempotency_key == new.idempotency_key,
    )).one_or_none()
    if found is None:
        return None
    request_id, body_digest = found
    if body_digest != new.digest():
        raise IdempotencyConflict(
            f"idempotency key {new.idempotency_key!r} was used for request {request_id}, with another body",
            {"idempotencyKey": new.idempotency_key, "requestId": request_id})
    return str(request_id)


def create(rt: Runtime, db: DbSession, requester: Principal, digest: str, new: NewRequest) -> str:
    """The request, in its place's session (or one of its own), with its `input.requested` event; its id."""
    now = rt.now()
    if new.place is not None:
        session_id = session_at(rt, db, new.place.channel, new.place.address, requester)
    else:
        session_id = insert_session(rt, db, requester, "api", None)
    lock_session(db, session_id)  # requests and events are numbered under its lock
    asked: dict[str, Any]
    if new.kind == "tool-approval":
        assert new.tool_name is not None and new.tool_input is not None
        asked = {"prompt": new.prompt or f"Approve {new.tool_name}?", "options": [APPROVE, DENY],
                 "allow_freeform": False, "display": "confirmation",
                 "action": {"kind": "tool-call", "callId": new_id("call"), "toolName": new.tool_name,
                            "input": new.tool_input}}
        if new.editable:  # (edits are checked by edit_checker, engine/answers/submit.py)
            asked["action"] |= {"editable": True, "inputSchema": new.input_schema or ANY_OBJECT}
    else:
        assert new.prompt is not None
        asked = {"prompt": new.prompt, "options": new.options, "allow_freeform": new.allow_freeform or not new.options,
                 "display": "select" if new.options else "text"}
    request = open_request(db, session_id=session_id, turn_id=None, run_id=None, kind=new.kind,
                           requested_by=requester.wire(), now=now, expires_at=expiry(new.expires_in, now),
                           schedule=new.schedule, channels=rt.channels, shown=new.shown, **asked)
    db.flush()  # the request's row before the rows that refer to it
    external = ExternalRequest(
        request_id=request.request_id, requester_digest=digest, requester_id=requester.principal_id,
        idempotency_key=new.idempotency_key,
        body_digest=new.digest(), request_metadata=new.metadata, callback_url=new.callback_url,
        callback_status=CallbackStatus.WAITING if new.callback_url else None, callback_attempts=0,
        quorum=new.quorum if new.quorum > 1 else None)
    db.add(external)
    db.add_all(RequestApprover(request_id=request.request_id, principal_id=principal_id)
               for principal_id in dict.fromkeys(new.approvers))
    db.flush()  # (a key used at the same moment fails here)
    if any(platform_kind(item) for item in new.approvers):  # their members see it once looked up, after this commits
        rt.enqueue(db, "look_up_approvers", request.request_id)
    announce(rt, db, session_id, None, [request], now)
    return request.request_id


def cancel_external_request(rt: Runtime, request_id: str, principal: Principal) -> dict[str, Any]:
    """Close an external request `cancelled`: its places update, its callback hears it. Only the agent that made
    it may, or an operator; a request of an agent in the gateway closes with its turn (cancel the turn)."""
    with rt.transaction() as db:
        request = db.get(InputRequest, request_id)
        if request is None:
            raise NotFound(f"no input request {request_id!r}", {"requestId": request_id})
        if request.turn_id is not None:
            raise Conflict(f"request {request_id} is an agent's in the gateway: cancel its turn instead",
                           {"requestId": request_id, "turnId": request.turn_id})
        lock_session(db, request.session_id)
        requester = Principal.model_validate(request.requested_by)
        if principal.authenticator != "operator" and not principal.same_as(requester):
            raise NotPermitted(f"only {requester.display_name}, who asked, or an operator may cancel this request",
                               {"requestId": request_id})
        if close_request(rt, db, request_id, outcome=Outcome.CANCELLED, response=None, responder=principal) is None:
            raise RequestClosed(f"request {request_id} is no longer open (it was {request.outcome})",
                                {"requestId": request_id, "outcome": request.outcome})
    return get_request(rt, request_id)
