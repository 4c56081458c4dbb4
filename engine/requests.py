"""InputRequests: opening them and showing them on the wire."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.orm import Session as DbSession

from .protocol import InputRequestOut, principal_or_none
from .storage import APPROVE, DENY, new_id
from .tables import ExternalRequest, InputRequest, RequestApprover, ToolCall

OPTION_SYNONYMS = {"cancel": "deny", "deny": "cancel"}
"""A tool approval's refusal is `deny`; it was `cancel` while it read Cancel, and either id answers either (a
request opened then, a Slack card posted then, a client written then)."""
OPENED = "hitl_opened_requests"


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
) -> InputRequest:
    """A pending request, numbered within its session by its own INSERT (the caller holds the session row, so
    no other writer numbers one meanwhile): opening one reads nothing, so nothing is flushed early. An external
    request (engine/external.py) has no turn and no run."""
    seq = select(func.coalesce(func.max(InputRequest.seq), 0) + 1).where(
        InputRequest.session_id == session_id).scalar_subquery()
    request = InputRequest(
        request_id=request_id or new_id("req"), session_id=session_id, turn_id=turn_id, run_id=run_id,
        kind=kind, prompt=prompt, action=action, options=options, allow_freeform=allow_freeform,
        display=display, requested_by=requested_by, status="pending", seq=seq, created_at=now,
        expires_at=expires_at, call_id=call_id, position=position,
    )
    db.add(request)
    if turn_id is not None:
        db.info.setdefault(OPENED, set()).add(turn_id)
    return request


def opened_in(db: DbSession, turn_id: str) -> bool:
    """Whether this transaction opened a request of the turn (it is pending until the transaction commits)."""
    return turn_id in db.info.get(OPENED, ())


def open_approval(
    db: DbSession, call: ToolCall, *, title: str, session_id: str, requested_by: dict[str, Any] | None,
    now: datetime, prompt: str | None = None, expires_at: datetime | None = None,
    input_schema: dict[str, Any] | None = None,
) -> InputRequest:
    """A tool-approval request for `call`: Approve (primary) / Deny (danger), no free text; editable when
    given the schema of the input it may be approved with. The call's new state is set first: a call proposed
    in this transaction is then inserted with it (one statement)."""
    call.status = "awaiting_approval"
    call.approval_request_id = new_id("req")
    call.updated_at = now
    action: dict[str, Any] = {"kind": "tool-call", "callId": call.call_id, "toolName": call.tool, "input": call.input}
    if input_schema is not None:
        action |= {"editable": True, "inputSchema": input_schema}
    return open_request(
        db, session_id=session_id, turn_id=call.turn_id, run_id=call.run_id, kind="tool-approval",
        prompt=prompt or f"Approve {title}?", action=action,
        options=[APPROVE, DENY], allow_freeform=False, display="confirmation", requested_by=requested_by,
        now=now, expires_at=expires_at, call_id=call.call_id, request_id=call.approval_request_id,
    )


def option_named(ids: Iterable[str], given: str) -> str | None:
    """The id among `ids` that `given` names: itself (case-insensitive), else its synonym; None when none."""
    known = list(ids)
    for wanted in (given.lower(), OPTION_SYNONYMS.get(given.lower())):
        match = next((i for i in known if i.lower() == wanted), None)
        if match is not None:
            return match
    return None


def request_wire(request: InputRequest) -> dict[str, Any]:
    return request_out(request).wire()


def external_fields(db: DbSession, request: InputRequest, external: ExternalRequest | None = None,
                    callback: bool = True) -> dict[str, Any]:
    """What an external request shows beyond the usual shape: its approvers (none: anyone its place admits), the
    agent's idempotency key and metadata, and (with `callback`) its callback's delivery (null without a URL)."""
    external = external or db.get_one(ExternalRequest, request.request_id)
    approvers = db.execute(select(RequestApprover.principal_id).where(
        RequestApprover.request_id == request.request_id).order_by(RequestApprover.principal_id)).scalars()
    fields = {"approvers": list(approvers), "idempotencyKey": external.idempotency_key,
              "metadata": external.request_metadata}
    return fields | {"callback": callback_state(external)} if callback else fields


def callback_state(external: ExternalRequest) -> dict[str, Any] | None:
    """`{status, attempts, lastError, nextAttemptAt}`: `waiting` while the request is open, then `sending`,
    `retrying` (the next attempt at nextAttemptAt), `delivered` or `failed` (retried for 24 h)."""
    if external.callback_url is None:
        return None
    due = external.callback_due_at if external.callback_status == "retrying" else None
    return {"status": external.callback_status, "attempts": external.callback_attempts,
            "lastError": external.callback_error, "nextAttemptAt": due.isoformat() if due else None}


def as_opened(request: InputRequest) -> dict[str, Any]:
    """The request on the wire as it was when it opened: pending, unanswered."""
    return request_out(request).model_copy(update={
        "status": "pending", "outcome": None, "response": None, "responder": None, "resolved_at": None,
    }).wire()


def request_out(request: InputRequest) -> InputRequestOut:
    return InputRequestOut(
        request_id=request.request_id, session_id=request.session_id, turn_id=request.turn_id,
        kind=request.kind, prompt=request.prompt, action=request.action, editable=editable(request),
        options=request.options,
        allow_freeform=request.allow_freeform, display=request.display,
        requested_by=principal_or_none(request.requested_by), created_at=request.created_at,
        expires_at=request.expires_at, status=request.status,
        outcome=request.outcome, response=request.response, responder=principal_or_none(request.responder),
        resolved_at=request.resolved_at,
    )


def editable(request: InputRequest) -> bool:
    """Whether the request may be approved with another input (its action says so)."""
    return bool((request.action or {}).get("editable"))


SHOWN_ORDER = (case((InputRequest.kind == "session-limit", 0), else_=1), InputRequest.seq)
"""The order typed replies and text channels take open requests in: a session-limit prompt first, then the
earliest."""


def open_in_order(db: DbSession, where: ColumnElement[bool]) -> list[InputRequest]:
    """Open requests in the order typed replies and text channels take them (`SHOWN_ORDER`)."""
    return list(db.execute(
        select(InputRequest).where(where, InputRequest.status == "pending").order_by(*SHOWN_ORDER)
    ).scalars())
