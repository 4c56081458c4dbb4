"""The checks of a response before it is stored (engine/answers/submit.py stores, judges and settles it).

A response must name an open request (of the session asked, when one is); its option, text and any edited input
must fit that request (`read_response`, `edited_input`); an edited approve goes only to a request one person can
settle. The policy that will judge it (`response_policy_for`, an escalation's approvers included) is found here
too. Nothing here writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session as DbSession

from engine.answers.edits import Checker, Problem, changes, checked_edit, model_problems, schema_problems
from engine.answers.external import ANY_OBJECT, external_policy
from engine.answers.input_requests import editable
from engine.answers.options import read_response
from engine.answers.timers import escalated_approvers
from engine.errors import InvalidInput, NotFound, RequestClosed
from engine.jobs.runtime import Runtime
from engine.people import OWNER, with_person
from engine.policies import ResponseInfo, ResponsePolicy, approvers, escalated, need_of, requester_only
from engine.protocol import InputResponse, Principal
from engine.store.statuses import RequestStatus
from engine.store.tables import InputRequest, ToolCall

_REQUEST_AND_CALL = select(InputRequest, ToolCall).outerjoin(ToolCall, ToolCall.call_id == InputRequest.call_id) \
    .where(InputRequest.request_id == bindparam("request"))
"""A request and the tool call it asks about, if any, in one read, built once (see turns/transitions.py)."""
_CHECKED = _REQUEST_AND_CALL.add_columns(OWNER)
"""The same, with the name of the person the bound `principal` is linked to (engine/people.py)."""


@dataclass(frozen=True)
class Checked:
    """A response validated against its request: the option resolved, the text trimmed, an edited input
    checked (None: approved as proposed). `request` is the row read in the validating transaction, `call` the
    tool call it asks about, if any (held here: the session's identity map keeps no row alive); `external` the
    response policy of an external request (no agent's applies); `escalated_to` the approvers its escalation
    added (None: not escalated)."""

    response: InputResponse
    option_id: str | None
    text: str | None
    input: dict[str, Any] | None
    request: InputRequest
    call: ToolCall | None
    external: approvers | None = None
    escalated_to: frozenset[str] | None = None

    def info(self, responder: Principal) -> ResponseInfo:
        return ResponseInfo(responder, self.option_id, self.text, self.input)


def check_responses(rt: Runtime, db: DbSession, principal: Principal, responses: list[InputResponse],
                    session_id: str | None) -> tuple[Principal, list[Checked]]:
    """Check every response against its request (NotFound, RequestClosed, InvalidInput: nothing is stored), and
    give the responder the person it is linked to (`with_person`): each request is read with the name of that
    person (`people.OWNER`), so asking costs no statement of its own."""
    checked: list[Checked] = []
    owner: str | None = None
    for response in responses:
        request, call, owner = db.execute(_CHECKED, {"request": response.request_id, "principal": (
            principal.principal_id)}).one_or_none() or (None, None, owner)
        if session_id is not None and request is not None and request.session_id != session_id:
            request = None
        checked.append(check(rt, db, response, request, call))
    return (with_person(db, principal, owner) if checked else principal), checked


def check(rt: Runtime, db: DbSession, response: InputResponse, request: InputRequest | None,
          call: ToolCall | None) -> Checked:
    """One response checked against its request as read (None: there is none, or not in the session asked)."""
    if request is None:
        raise NotFound(f"no input request {response.request_id!r}", {"requestId": response.request_id})
    if request.status != RequestStatus.PENDING:
        raise RequestClosed(
            f"request {request.request_id} is no longer open (it was {request.outcome})",
            {"requestId": request.request_id, "outcome": request.outcome},
        )
    option_id, text = read_response(request, response)
    checked = Checked(response, option_id, text, edited_input(rt, request, call, option_id, response.input), request,
                      call, external_policy(db, request), escalated_approvers(db, request))
    if checked.input is not None and (need := need_of(response_policy_for(rt, checked))) > 1:
        raise InvalidInput(f"request {request.request_id} takes {need} people's approvals: approve it as proposed "
                           "(an edited input would run on one person's word)", {"requestId": request.request_id})
    return checked


def edited_input(rt: Runtime, request: InputRequest, call: ToolCall | None, option_id: str | None,
                 data: dict[str, Any] | None) -> dict[str, Any] | None:
    """The input an approve carries, checked against what its request takes; None when it carries none or the
    proposed one. InvalidInput (nothing changes) for an input that does not fit, one sent to a request that is
    not editable, or one sent with another option than approve."""
    if data is None:
        return None
    checker = edit_checker(rt, request, call)
    if checker is None:
        raise InvalidInput(f"request {request.request_id} is not editable: answer it without an input",
                           {"requestId": request.request_id})
    if option_id != "approve":
        raise InvalidInput("an edited input goes only with approve", {"requestId": request.request_id})
    action = request.action or {}
    checked_edit(request.request_id, str(action.get("toolName")), data, checker)
    return data if changes(action.get("input") or {}, data) is not None else None


def edit_problems(rt: Runtime, request_id: str, data: dict[str, Any]) -> list[Problem]:
    """What is wrong with approving request `request_id` with input `data` (nothing: []), for a channel that
    checks an edit before it stores the approve (Slack's modal shows the problems at once)."""
    with rt.db.read() as db:
        request, call = db.execute(_REQUEST_AND_CALL, {"request": request_id}).one_or_none() or (None, None)
        checker = edit_checker(rt, request, call) if request is not None else None
    if checker is None:
        return [{"field": "input", "problem": "this request takes no edited input"}]
    return checker(data)


def edit_checker(rt: Runtime, request: InputRequest, call: ToolCall | None) -> Checker | None:
    """What an edited input of this request must fit, or None when it takes none: an editable approval of an
    in-process tool checks with the tool's input model, an external one with its `action.inputSchema`."""
    if not editable(request):
        return None
    if request.turn_id is None:
        return schema_problems((request.action or {}).get("inputSchema") or ANY_OBJECT)
    tool = rt.agent.tools.get(call.tool) if call is not None else None
    return model_problems(tool.input_model) if tool is not None else None


def response_policy_for(rt: Runtime, checked: Checked) -> ResponsePolicy:
    """An external request's own (`approvers`); else the tool's response policy (the approved tool, or the tool
    that asked), else the agent's, else the default; for an escalated request, that policy with the escalation's
    approvers allowed too (`escalated`)."""
    policy: ResponsePolicy
    if checked.external is not None:
        policy = checked.external
    else:
        tool = rt.agent.tools.get(checked.call.tool) if checked.call else None
        policy = (tool.response_policy if tool else None) or rt.agent.response_policy or requester_only
    return escalated(policy, checked.escalated_to) if checked.escalated_to else policy
