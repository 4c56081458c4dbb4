"""InputRequests: opening them and showing them on the wire."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import ColumnElement, case, func, null, select
from sqlalchemy.orm import Session as DbSession

from engine.answers.options import APPROVE, DENY
from engine.answers.schedules import NO_SCHEDULE, ON_TIMEOUT, Place, Schedule
from engine.answers.showing import IN_SESSION, Showing, remember
from engine.policies import expiry
from engine.protocol import InputRequestOut, principal_or_none
from engine.store.statuses import CallbackStatus, CallStatus, RequestStatus
from engine.store.storage import new_id
from engine.store.tables import ExternalRequest, InputRequest, RequestApprover, RequestPlace, RequestTimer, ToolCall
from engine.store.tx import Tx

if TYPE_CHECKING:
    from engine.agent import Tool

log = logging.getLogger(__name__)

def open_request(
    db: DbSession,
    *,
    session_id: str,
    turn_id: str | None,
    run_id: str | None,
    kind: str,
    prompt: str,
    options: list[dict[str, Any]],
    allow_freeform: bool,
    display: str,
    requested_by: dict[str, Any] | None,
    now: datetime,
    action: dict[str, Any] | None = None,
    request_id: str | None = None,
    expires_at: datetime | None = None,
    call_id: str | None = None,
    position: int = 0,
    schedule: Schedule = NO_SCHEDULE,
    channels: Mapping[str, Any] | None = None,
    shown: Showing = IN_SESSION,
) -> InputRequest:
    """A pending request, numbered within its session by its own INSERT (the caller holds the session row, so
    no other writer numbers one meanwhile): opening one reads nothing, so nothing is flushed early. An external
    request (engine/answers/external.py) has no turn and no run. Its `schedule`'s reminders and escalation become timer
    rows (engine/answers/timers.py), inserted with it; its escalation places get their session addresses from the
    configured `channels` now (see `places_at`). Its `shown` places are kept for `announce` (engine/answers/places.py),
which shows it there."""
    seq = select(func.coalesce(func.max(InputRequest.seq), 0) + 1).where(
        InputRequest.session_id == session_id).scalar_subquery()
    request = InputRequest(
        request_id=request_id or new_id("req"), session_id=session_id, turn_id=turn_id, run_id=run_id,
        kind=kind, prompt=prompt, action=action, options=options, allow_freeform=allow_freeform,
        display=display, requested_by=requested_by, status=RequestStatus.PENDING, seq=seq, created_at=now,
        expires_at=expires_at, call_id=call_id, position=position, on_timeout=schedule.on_timeout, reminded=0,
        shown_in_session=shown.in_session,
    )
    db.add(request)
    remember(db, request.request_id, shown)
    db.add_all(timers(request.request_id, schedule, now, channels or {}))
    if turn_id is not None:
        Tx.of(db).opened.add(turn_id)
    return request


def timers(request_id: str, schedule: Schedule, now: datetime, channels: Mapping[str, Any]) -> list[RequestTimer]:
    """The rows that make a request's reminders and escalation fall due (the first reminder `remind_every` after
    it opens); the escalation's row also keeps its `after` and its places as given, which the request shows
    (`schedule_fields`)."""
    rows = []
    if schedule.remind_every is not None:
        rows.append(RequestTimer(request_id=request_id, kind="remind", every=schedule.remind_every,
                                 max=schedule.remind_max, due_at=now + timedelta(seconds=schedule.remind_every)))
    if schedule.escalate_after is not None:
        rows.append(RequestTimer(request_id=request_id, kind="escalate",
                                 due_at=now + timedelta(seconds=schedule.escalate_after),
                                 data={"to": places_at(request_id, schedule.escalate_to, channels),
                                       "approvers": list(schedule.escalate_approvers),
                                       "after": schedule.escalate_after,
                                       "given": [place.wire() for place in schedule.escalate_to]}))
    return rows


def places_at(request_id: str, places: Iterable[Place], channels: Mapping[str, Any]) -> list[dict[str, str]]:
    """Each escalation place as `{channel, address}` with the session address its channel's adapter makes of it.
    A place whose channel is not configured, or whose address its adapter refuses, is logged and left out (the
    escalation's approvers still get their right)."""
    found = []
    for place in places:
        adapter = channels.get(place.channel)
        try:
            if adapter is None:
                raise ValueError(f"channel {place.channel!r} is not configured")
            found.append({"channel": place.channel, "address": adapter.address(dict(place.address))})
        except ValueError as exc:
            log.error("request %s will not escalate to %s: %s", request_id, place.wire(), exc)
    return found


def opened_in(db: DbSession, turn_id: str) -> bool:
    """Whether this transaction opened a request of the turn (it is pending until the transaction commits)."""
    return turn_id in Tx.of(db).opened


def open_approval(
    db: DbSession, call: ToolCall, tool: Tool, *, session_id: str, requested_by: dict[str, Any] | None,
    now: datetime, channels: Mapping[str, Any], prompt: str | None = None,
) -> InputRequest:
    """A tool-approval request for `call` of `tool`: Approve (primary) / Deny (danger), no free text; editable
    when the tool is (its action then carries the schema of the input it may be approved with); open until the
    tool's `expires_in`, on the tool's schedule (its places at the configured `channels`), shown where the tool's
    `show_to` and `show_in_session` say. The call's new state is
    set first: a call proposed in this transaction is then inserted with it (one statement)."""
    call.status = CallStatus.AWAITING_APPROVAL
    call.approval_request_id = new_id("req")
    call.updated_at = now
    action: dict[str, Any] = {"kind": "tool-call", "callId": call.call_id, "toolName": call.tool, "input": call.input}
    if tool.edit_schema is not None:
        action |= {"editable": True, "inputSchema": tool.edit_schema}
    return open_request(
        db, session_id=session_id, turn_id=call.turn_id, run_id=call.run_id, kind="tool-approval",
        prompt=prompt or f"Approve {tool.title}?", action=action,
        options=[APPROVE, DENY], allow_freeform=False, display="confirmation", requested_by=requested_by,
        now=now, expires_at=expiry(tool.expires_in, now), call_id=call.call_id, request_id=call.approval_request_id,
        schedule=tool.schedule, channels=channels, shown=tool.shown,
    )


def request_wire(request: InputRequest) -> dict[str, Any]:
    return request_out(request).wire()


def external_fields(db: DbSession, request: InputRequest, external: ExternalRequest | None = None,
                    callback: bool = True) -> dict[str, Any]:
    """What an external request shows beyond the usual shape: its approvers (none: anyone its place admits) and
    how many of them must approve (`quorum`), the agent's idempotency key and metadata, and (with `callback`) its
    callback's delivery (null without a URL)."""
    external = external or db.get_one(ExternalRequest, request.request_id)
    approvers = db.execute(select(RequestApprover.principal_id).where(
        RequestApprover.request_id == request.request_id).order_by(RequestApprover.principal_id)).scalars()
    fields = {"approvers": list(approvers), "quorum": external.quorum or 1,
              "idempotencyKey": external.idempotency_key, "metadata": external.request_metadata}
    return fields | {"callback": callback_state(external)} if callback else fields


def schedule_fields(db: DbSession, request: InputRequest) -> dict[str, Any]:
    """The request's reminders and escalation as it was opened with them, in POST /api/requests' words:
    `remind` `{every, max}` and `escalate` `{after, to: [places], approvers}`, each null when it has none."""
    rows = {timer.kind: timer for timer in db.execute(
        select(RequestTimer).where(RequestTimer.request_id == request.request_id)).scalars()}
    remind, escalate = rows.get("remind"), rows.get("escalate")
    data = (escalate.data or {}) if escalate is not None else {}
    return {
        "remind": {"every": remind.every, "max": remind.max} if remind is not None else None,
        "escalate": {"after": data.get("after"), "to": data.get("given", data.get("to", [])),
                     "approvers": data.get("approvers", [])} if escalate is not None else None,
    }


def callback_state(external: ExternalRequest) -> dict[str, Any] | None:
    """`{status, attempts, lastError, nextAttemptAt}`: `waiting` while the request is open, then `sending`,
    `retrying` (the next attempt at nextAttemptAt), `delivered` or `failed` (retried for 24 h)."""
    if external.callback_url is None:
        return None
    due = external.callback_due_at if external.callback_status == CallbackStatus.RETRYING else None
    return {"status": external.callback_status, "attempts": external.callback_attempts,
            "lastError": external.callback_error, "nextAttemptAt": due.isoformat() if due else None}


def as_opened(request: InputRequest) -> dict[str, Any]:
    """The request on the wire as it was when it opened: pending, unanswered, neither reminded nor escalated."""
    return request_out(request).model_copy(update={
        "status": RequestStatus.PENDING, "outcome": None, "response": None, "responder": None, "resolved_at": None,
        "reminded": 0, "escalated_at": None,
    }).wire()


def request_out(request: InputRequest) -> InputRequestOut:
    return InputRequestOut(
        request_id=request.request_id, session_id=request.session_id, turn_id=request.turn_id,
        kind=request.kind, prompt=request.prompt, action=request.action, editable=editable(request),
        options=request.options,
        allow_freeform=request.allow_freeform, display=request.display,
        requested_by=principal_or_none(request.requested_by), created_at=request.created_at,
        expires_at=request.expires_at, on_timeout=on_timeout(request), status=request.status,
        outcome=request.outcome, response=request.response, responder=principal_or_none(request.responder),
        resolved_at=request.resolved_at, reminded=request.reminded or 0, escalated_at=request.escalated_at,
        approvals=(request.response or {}).get("approvals"),
    )


def on_timeout(request: InputRequest) -> str | None:
    """What the request's expiry means (None: it does not expire)."""
    if request.expires_at is None:
        return None
    return request.on_timeout or ON_TIMEOUT.get(request.kind, ("deny",))[0]


def editable(request: InputRequest) -> bool:
    """Whether the request may be approved with another input (its action says so)."""
    return bool((request.action or {}).get("editable"))


SHOWN_ORDER = (case((InputRequest.kind == "session-limit", 0), else_=1), InputRequest.seq)
"""The order typed replies and text channels take open requests in: a session-limit prompt first, then the
earliest."""


def open_in_order(db: DbSession, where: ColumnElement[bool]) -> list[InputRequest]:
    """Open requests in the order typed replies and text channels take them (`SHOWN_ORDER`)."""
    return list(db.execute(
        select(InputRequest).where(where, InputRequest.status == RequestStatus.PENDING).order_by(*SHOWN_ORDER)
    ).scalars())


def shown_in(session_id: str) -> ColumnElement[bool]:
    """The requests a session shows: its own (unless shown only at their places) and those shown or escalated to
    it."""
    return ((InputRequest.session_id == session_id) & InputRequest.shown_in_session) | InputRequest.request_id.in_(
        select(RequestPlace.request_id).where(RequestPlace.session_id == session_id))


def open_shown_in(db: DbSession, session_id: str) -> list[InputRequest]:
    """The open requests a session shows (`shown_in`), in the order its text channel shows them and typed replies
    answer them: a session-limit prompt first, then its own, then those shown or escalated to it, each the earliest
    first (whatever session they come from)."""
    pending = InputRequest.status == RequestStatus.PENDING
    return list(db.execute(select(InputRequest).where(shown_in(session_id), pending)
                           .order_by(*escalated_last(session_id))).scalars())


def escalated_last(session_id: str) -> tuple[Any, ...]:
    """SHOWN_ORDER in a session that also shows requests of other sessions: its own before those, and those in the
    order they opened (their `seq` counts in their own sessions)."""
    own = InputRequest.session_id == session_id
    return (SHOWN_ORDER[0], case((own, 0), else_=1), case((own, null()), else_=InputRequest.created_at),
            InputRequest.seq)
