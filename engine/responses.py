"""The one entry point for answers: every channel and the API call `submit_responses()`.

Each response is first stored as a pending ResponseCandidate, then judged by the response policy
(outside any transaction: slow policy code loses nothing), then settles its request by compare-and-set.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import select, update
from sqlalchemy.orm import Session as DbSession

from .db import changed
from .errors import InvalidInput, NotFound, RequestClosed
from .events import emit
from .policies import ResponseContext, ResponseInfo, ResponsePolicy, requester_only
from .protocol import InputRequestOut, InputResponse, Principal
from .requests import OPTION_SYNONYMS, request_out
from .runner import reject_call, session_info
from .runtime import Runtime
from .tables import ApprovalGrant, InputRequest, ResponseCandidate, Session, ToolCall
from .turns import lock_turn, schedule_resume

log = logging.getLogger(__name__)

Status = Literal["settled", "pending", "refused", "stale"]


@dataclass(frozen=True)
class ResponseResult:
    """What became of one response: it settled its request, waits on the policy, was refused, or came late."""

    request_id: str
    status: Status
    request: InputRequestOut
    reason: str | None = None

    def wire(self) -> dict[str, Any]:
        return {"requestId": self.request_id, "status": self.status, "reason": self.reason,
                "request": self.request.wire()}


@dataclass(frozen=True)
class Checked:
    response: InputResponse
    option_id: str | None
    text: str | None
    kind: str


def submit_responses(
    rt: Runtime, principal: Principal, responses: list[InputResponse], *, session_id: str | None = None
) -> list[ResponseResult]:
    """Validate every response first (all or nothing), then record, judge and settle each in turn."""
    checked = [check(rt, r, session_id) for r in responses]
    return [settle_one(rt, principal, c) for c in checked]


def check(rt: Runtime, response: InputResponse, session_id: str | None) -> Checked:
    with rt.db.read() as db:
        request = db.get(InputRequest, response.request_id)
        if request is None or (session_id is not None and request.session_id != session_id):
            raise NotFound(f"no input request {response.request_id!r}", {"requestId": response.request_id})
        if request.status != "pending":
            raise RequestClosed(
                f"request {request.request_id} is no longer open (it was {request.outcome})",
                {"requestId": request.request_id, "outcome": request.outcome},
            )
        option_id, text = normalize(request, response)
        return Checked(response, option_id, text, request.kind)


def normalize(request: InputRequest, response: InputResponse) -> tuple[str | None, str | None]:
    """The option a response names (synonyms resolved, case-insensitive) and its text, or InvalidInput."""
    text = response.text.strip() if response.text is not None else None
    text = text or None
    option_id = None
    if response.option_id is not None:
        wanted = OPTION_SYNONYMS.get(response.option_id.lower(), response.option_id.lower())
        ids = [o["id"] for o in request.options]
        match = next((i for i in ids if i.lower() == wanted), None)
        if match is None:
            raise InvalidInput(
                f"request {request.request_id} has no option {response.option_id!r}",
                {"requestId": request.request_id, "options": ids},
            )
        option_id = match
    if request.kind == "question":
        if (option_id is None) == (text is None):
            raise InvalidInput("answer a question with exactly one of optionId or text",
                               {"requestId": request.request_id})
        if text is not None and not request.allow_freeform:
            raise InvalidInput("this question takes one of its options", {"requestId": request.request_id})
    else:
        if option_id is None:
            raise InvalidInput(f"a {request.kind} request needs an optionId",
                               {"requestId": request.request_id, "options": [o["id"] for o in request.options]})
        if text is not None and option_id != "cancel":
            raise InvalidInput("text is only accepted as a note with cancel", {"requestId": request.request_id})
    return option_id, text


def outcome_of(kind: str, option_id: str | None) -> str:
    if kind == "tool-approval":
        return "approved" if option_id == "approve" else "denied"
    return "answered"


def settle_one(rt: Runtime, principal: Principal, checked: Checked) -> ResponseResult:
    request_id = checked.response.request_id
    info = ResponseInfo(principal, checked.option_id, checked.text, checked.option_id)
    with rt.transaction() as db:
        candidate = ResponseCandidate(
            request_id=request_id, responder=principal.wire(), decision=info.decision, text=info.text,
            outcome="pending", created_at=rt.now(),
        )
        db.add(candidate)
        db.flush()
        candidate_id = candidate.candidate_id
        request = db.get_one(InputRequest, request_id)
        emit(db, request.session_id, "approval.candidate",
             {"candidateId": candidate_id, "requestId": request_id, "outcome": "pending",
              "responder": principal.wire()}, turn_id=request.turn_id, at=rt.now())
        context = policy_context(db, request, info, candidate_id)
        policy = response_policy_for(rt, request)
    verdict, reason = judge(rt, policy, context)
    with rt.transaction() as db:
        request = db.get_one(InputRequest, request_id)
        turn = lock_turn(db, request.turn_id)
        candidate = db.get_one(ResponseCandidate, candidate_id)
        candidate.judged_at = rt.now()
        if verdict == "pending":
            return ResponseResult(request_id, "pending", request_out(request))
        if verdict != "allowed":
            candidate.outcome, candidate.reason = verdict, reason
            emit(db, request.session_id, "approval.candidate",
                 {"candidateId": candidate_id, "requestId": request_id, "outcome": verdict,
                  "responder": principal.wire(), "reason": reason}, turn_id=request.turn_id, at=rt.now())
            if request.status == "pending":
                emit(db, request.session_id, "turn.waiting", {"on": "input"}, turn_id=request.turn_id, at=rt.now())
            return ResponseResult(request_id, "refused", request_out(request), reason)
        outcome = outcome_of(request.kind, checked.option_id)
        response = {"optionId": checked.option_id, "text": checked.text}
        won = changed(db,
            update(InputRequest)
            .where(InputRequest.request_id == request_id, InputRequest.status == "pending")
            .values(status="resolved", outcome=outcome, response=response, responder=principal.wire(),
                    resolved_at=rt.now())
        ) == 1
        if not won:
            candidate.outcome, candidate.reason = "stale", "the request was already settled"
            emit(db, request.session_id, "approval.candidate",
                 {"candidateId": candidate_id, "requestId": request_id, "outcome": "stale",
                  "responder": principal.wire(), "reason": candidate.reason}, turn_id=request.turn_id, at=rt.now())
            db.refresh(request)
            return ResponseResult(request_id, "stale", request_out(request), candidate.reason)
        candidate.outcome = "allowed"
        db.refresh(request)
        apply_settlement(rt, db, request, principal)
        schedule_resume(rt, db, turn)
        return ResponseResult(request_id, "settled", request_out(request))


def apply_settlement(rt: Runtime, db: DbSession, request: InputRequest, responder: Principal) -> None:
    """The events and effects of a request that just settled (the caller won the compare-and-set)."""
    now = rt.now()
    session_id, turn_id = request.session_id, request.turn_id
    if request.kind == "tool-approval":
        emit(db, session_id, "approval.settled",
             {"requestId": request.request_id, "outcome": request.outcome, "responder": responder.wire()},
             turn_id=turn_id, at=now)
    emit(db, session_id, "input.resolved", {"resolutions": [{
        "requestId": request.request_id, "kind": request.kind, "outcome": request.outcome,
        "response": request.response, "responder": responder.wire(),
    }]}, turn_id=turn_id, at=now)
    if request.kind != "tool-approval":
        return
    call = db.execute(select(ToolCall).where(ToolCall.approval_request_id == request.request_id)).scalar_one()
    if request.outcome == "approved":
        call.status, call.responder, call.updated_at = "approved", responder.wire(), now
        tool = rt.agent.tools.get(call.tool)
        if tool is not None:
            db.add(ApprovalGrant(session_id=session_id, approval_key=tool.approval_key,
                                 granted_by=responder.wire(), request_id=request.request_id, created_at=now))
        return
    note = (request.response or {}).get("text")
    verb = {"denied": "Cancelled"}.get(request.outcome or "", (request.outcome or "closed").capitalize())
    reject_call(rt, db, call, f"{verb} by {responder.display_name}" + (f": {note}" if note else ""), session_id)


def policy_context(db: DbSession, request: InputRequest, info: ResponseInfo, candidate_id: str) -> ResponseContext:
    earlier = db.execute(
        select(ResponseCandidate).where(
            ResponseCandidate.request_id == request.request_id, ResponseCandidate.outcome == "pending",
            ResponseCandidate.candidate_id != candidate_id,
        ).order_by(ResponseCandidate.created_at)
    ).scalars()
    candidates = [
        ResponseInfo(Principal.model_validate(c.responder), c.decision, c.text, c.decision)
        for c in earlier
    ]
    session = db.get_one(Session, request.session_id)
    return ResponseContext(request=request_out(request), response=info, session=session_info(session),
                           candidates=candidates)


def response_policy_for(rt: Runtime, request: InputRequest) -> ResponsePolicy:
    """The tool's response policy, else the agent's, else the default requester-only policy."""
    tool_name = (request.action or {}).get("toolName", "")
    tool = rt.agent.tools.get(tool_name)
    return (tool.response_policy if tool else None) or rt.agent.response_policy or requester_only


def judge(rt: Runtime, policy: ResponsePolicy, context: ResponseContext) -> tuple[str, str | None]:
    """Run a response policy: `allowed`, `pending`, `rejected`, `failed` or `timed-out`, with a reason."""
    try:
        result = policy(context)
        if inspect.isawaitable(result):
            result = asyncio.run(_bounded(result, rt.response_policy_timeout))
    except TimeoutError:
        return "timed-out", "the response policy did not answer in time"
    except Exception as exc:
        log.exception("response policy failed")
        return "failed", f"the response policy failed: {type(exc).__name__}"
    status = result.get("status") if isinstance(result, dict) else None
    if status in ("allowed", "pending"):
        return status, None
    if status == "rejected":
        return "rejected", str(result.get("reason") or "refused by the response policy")
    return "failed", f"the response policy returned {result!r}"


async def _bounded(awaitable: Any, timeout: float) -> Any:
    return await asyncio.wait_for(awaitable, timeout)

