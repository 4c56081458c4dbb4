"""The one entry point for answers: every channel and the API call `submit_responses()`.

Each response is first checked against its request (engine/answers/checks.py), then stored as a pending
ResponseCandidate, then judged by the response policy (outside any transaction: slow policy code loses
nothing), then settles its request by compare-and-set.
The default policy (`requester_only`) and an external request's (`approvers`) only compare principals:
responses they judge, all to one session, are judged and settled in the transaction that stores them. A
candidate whose process died before its verdict was applied is judged again by sweep() (`judge_again`); the
first verdict applied stands. That a request settles exactly once is engine/answers/settlement.py's rule. An
approve that an `approvers(..., quorum=N)` policy allows is counted under the request's lock
(engine/answers/quorum.py): it settles the request only as the Nth distinct person's.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.answers.checks import Checked, check_responses, response_policy_for
from engine.answers.directory import PeopleDirectory
from engine.answers.edits import changes, read_stored, stored_text
from engine.answers.external import external_policy
from engine.answers.input_requests import request_out
from engine.answers.options import outcome_of
from engine.answers.quorum import tally
from engine.answers.settlement import ALREADY_SETTLED, close_request, insert_candidate, judge_candidate, judged_before
from engine.answers.timers import escalated_approvers, places_hearing
from engine.channels.delivery import NOT_TAKEN
from engine.errors import AlreadyApplied
from engine.jobs.runtime import Runtime
from engine.people import Person, linked_person, person_of
from engine.policies import (
    ResponseContext,
    ResponseInfo,
    ResponsePolicy,
    judged_at_once,
    need_of,
)
from engine.protocol import Approvals, InputRequestOut, InputResponse, Principal
from engine.store.access import check_answers_requests
from engine.store.events import emit
from engine.store.statuses import CandidateOutcome, RequestStatus, TurnStatus
from engine.store.storage import new_id
from engine.store.tables import InputRequest, ResponseCandidate, Session, ToolCall, Turn
from engine.store.tx import Tx
from engine.turns.call_policies import session_info
from engine.turns.transitions import lock_for, schedule_resume

log = logging.getLogger(__name__)

Status = Literal["settled", "pending", "refused", "stale"]
_STATUS_OF: dict[str, Status] = {CandidateOutcome.ALLOWED: "settled", CandidateOutcome.PENDING: "pending",
                                  CandidateOutcome.STALE: "stale"}
"""What a stored verdict answered (any other outcome refused)."""
SUPERSEDED = "the same person answered again since (a channel's retry of this answer, or a new one)"


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


def submit_responses(
    rt: Runtime, principal: Principal, responses: list[InputResponse], *, session_id: str | None = None,
    claim: Callable[[DbSession], bool] | None = None,
) -> list[ResponseResult]:
    """Validate every response and store each as a pending candidate, in one transaction (all or nothing),
    then judge and settle each in turn. `claim` (an inbound item's compare-and-set) runs in the transaction
    that settles them when the default policy judges them there (when it returns False they were applied
    before: AlreadyApplied, and nothing changes), else once they are settled (applying them again then
    finds their requests closed). An agent may answer none (NotPermitted)."""
    check_answers_requests(principal)
    with rt.transaction() as db:
        principal, checked = check_responses(rt, db, principal, responses, session_id)  # (principal: with its person)
        sessions = {c.request.session_id for c in checked}
        at_once = len(sessions) == 1 and all(judged_at_once(response_policy_for(rt, c)) for c in checked)
        if at_once:  # the session's row first, as every writer takes it (its events are then counted there)
            lock_for(db, checked[0].request)  # (with the first request's turn, in one statement)
            if claim is not None and not claim(db):
                raise AlreadyApplied(checked[0].request.session_id)
        recorded = [record_candidate(rt, db, c.info(principal), c, at_once) for c in checked]
        if at_once:
            return [settle(rt, db, principal, c, candidate_id, *judge(rt, policy, context))
                    for c, (candidate_id, context, policy) in zip(checked, recorded, strict=True)]
    results = [settle_one(rt, principal, c, *r) for c, r in zip(checked, recorded, strict=True)]
    if claim is not None:
        with rt.transaction() as db:
            claim(db)
    return results


def settle_one(rt: Runtime, principal: Principal, checked: Checked, candidate_id: str, context: ResponseContext,
               policy: ResponsePolicy) -> ResponseResult:
    verdict, reason = judge(rt, policy, context)
    with rt.transaction() as db:
        return settle(rt, db, principal, checked, candidate_id, verdict, reason)


def settle(rt: Runtime, db: DbSession, principal: Principal, checked: Checked, candidate_id: str, verdict: str,
           reason: str | None) -> ResponseResult:
    """Apply the policy's verdict on a stored candidate, in the caller's transaction."""
    request_id = checked.response.request_id
    request = db.get_one(InputRequest, request_id)
    turn = lock_for(db, request)
    earlier = judged_before(db, candidate_id)
    if earlier is not None:  # the first verdict stands
        outcome, stored_reason = earlier
        return ResponseResult(request_id, _STATUS_OF.get(outcome, "refused"), request_out(request), stored_reason)
    if verdict == CandidateOutcome.PENDING:
        judge_candidate(rt, db, candidate_id)
        return ResponseResult(request_id, "pending", request_out(request))
    if verdict != CandidateOutcome.ALLOWED:
        judge_candidate(rt, db, candidate_id, verdict, reason)
        judged(rt, db, request, candidate_id, verdict, reason, principal)
        still_waiting(rt, db, request, turn)
        status: Status = "stale" if verdict == CandidateOutcome.STALE else "refused"
        return ResponseResult(request_id, status, request_out(request), reason)
    response: dict[str, Any] = {"optionId": checked.option_id, "text": checked.text}
    if checked.input is not None:
        response |= {"input": checked.input, "changes": changes((request.action or {})["input"], checked.input)}
    if outcome_of(request.kind, checked.option_id) == "approved" and (approvals := tally(
            db, request_id, need_of(response_policy_for(rt, checked)), principal)) is not None:
        if approvals.have < approvals.need:  # counted: the request waits for more people (engine/answers/quorum.py)
            judge_candidate(rt, db, candidate_id, "pending", approvals.progress)
            judged(rt, db, request, candidate_id, "pending", approvals.progress, principal, approvals)
            still_waiting(rt, db, request, turn)
            return ResponseResult(request_id, "pending", request_out(request).model_copy(
                update={"approvals": approvals}), approvals.progress)
        response["approvals"] = approvals.wire()
    settled = close_request(rt, db, request_id, outcome=outcome_of(request.kind, checked.option_id),
                            response=response, responder=principal)
    if settled is None:
        reason = ALREADY_SETTLED
        judge_candidate(rt, db, candidate_id, CandidateOutcome.STALE, reason)
        judged(rt, db, request, candidate_id, CandidateOutcome.STALE, reason, principal)
        db.refresh(request)
        return ResponseResult(request_id, "stale", request_out(request), reason)
    judge_candidate(rt, db, candidate_id, CandidateOutcome.ALLOWED)
    if turn is not None:
        schedule_resume(rt, db, turn)
    return ResponseResult(request_id, "settled", request_out(settled))


def still_waiting(rt: Runtime, db: DbSession, request: InputRequest, turn: Turn | None) -> None:
    """A response that did not settle its request: a turn parked on it says it still waits (a running turn says so
    when it parks)."""
    if request.status == RequestStatus.PENDING and turn is not None and turn.status == TurnStatus.WAITING:
        emit(db, request.session_id, "turn.waiting", {"on": "input"}, turn_id=request.turn_id, at=rt.now())


def unjudged_candidates(rt: Runtime) -> list[str]:
    """Candidates stored and never judged, well past the time judging takes: the process judging them died."""
    cutoff = rt.now() - timedelta(seconds=rt.response_policy_timeout + defaults.SWEEP_CANDIDATE_AFTER_SECONDS)
    with rt.db.read() as db:
        return list(db.execute(select(ResponseCandidate.candidate_id).where(
            ResponseCandidate.judged_at.is_(None), ResponseCandidate.created_at < cutoff,
        ).order_by(ResponseCandidate.created_at).limit(100)).scalars())


def judge_again(rt: Runtime, candidate_id: str) -> int:
    """Judge a candidate left unjudged and settle it as the call that stored it would have: 1 if this call
    settled it (a concurrent sweep, or the original call still running, may have), else 0. A candidate of a
    request closed meanwhile, or one its responder followed with another answer (a channel re-sends an item whose
    job died: judging both would tell a refusal twice), is `stale`, with no policy run."""
    with rt.db.read() as db:
        row = db.execute(select(ResponseCandidate, InputRequest, ToolCall)
                         .join(InputRequest, InputRequest.request_id == ResponseCandidate.request_id)
                         .outerjoin(ToolCall, ToolCall.call_id == InputRequest.call_id)
                         .where(ResponseCandidate.candidate_id == candidate_id)).one_or_none()
        if row is None or row[0].judged_at is not None:
            return 0
        candidate, request, call = row
        info = candidate_info(candidate)
        response = InputResponse(request_id=request.request_id, option_id=info.option_id, text=info.text,
                                 input=info.input)
        checked = Checked(response, info.option_id, info.text, info.input, request, call, external_policy(db, request),
                          escalated_approvers(db, request))
        answered_again = any(info.responder.same_as(Principal.model_validate(responder)) for responder in db.execute(
            select(ResponseCandidate.responder).where(ResponseCandidate.request_id == request.request_id,
                                                      ResponseCandidate.created_at > candidate.created_at)).scalars())
        judged_now = request.status == RequestStatus.PENDING and not answered_again
        context = policy_context(rt, db, request, info, candidate_id, False) if judged_now else None
    verdict, reason = judge(rt, response_policy_for(rt, checked), context) if context else \
        (CandidateOutcome.STALE,
         SUPERSEDED if answered_again and request.status == RequestStatus.PENDING else ALREADY_SETTLED)
    with rt.transaction() as db:
        lock_for(db, request)
        if judged_before(db, candidate_id) is not None:
            return 0  # by a sweep at the same time
        result = settle(rt, db, info.responder, checked, candidate_id, verdict, reason)
    log.warning("candidate %s of request %s: judged again after its process died: %s", candidate_id,
                result.request_id, result.status)
    return 1


def record_candidate(rt: Runtime, db: DbSession, info: ResponseInfo, checked: Checked,
                     judged_here: bool) -> tuple[str, ResponseContext, ResponsePolicy]:
    """Store the response as a pending candidate before any policy code runs: nothing can be lost. The policy
    is judged after this transaction commits, or in it (`judged_here`: `settle` then judges every candidate,
    and the candidate's row is inserted with its verdict, in this transaction)."""
    candidate_id = new_id("cand")
    row = {"candidate_id": candidate_id, "request_id": checked.response.request_id,
           "responder": info.responder.wire(), "decision": info.decision, "text": stored_text(info.text, info.input),
           "outcome": CandidateOutcome.PENDING, "reason": None, "created_at": rt.now(), "judged_at": None}
    if judged_here:
        Tx.of(db).unjudged[candidate_id] = row
    else:
        insert_candidate(db, row)
    request = checked.request
    judged(rt, db, request, candidate_id, CandidateOutcome.PENDING, None, info.responder)
    context = policy_context(rt, db, request, info, candidate_id, judged_here)
    return candidate_id, context, response_policy_for(rt, checked)


def judged(rt: Runtime, db: DbSession, request: InputRequest, candidate_id: str, outcome: str, reason: str | None,
           responder: Principal, approvals: Approvals | None = None) -> None:
    """The candidate's `approval.candidate` event; an approve counted toward a quorum carries the count."""
    data: dict[str, Any] = {"candidateId": candidate_id, "requestId": request.request_id, "outcome": outcome,
                            "responder": responder.wire()}
    if reason:
        data["reason"] = reason
    if approvals is not None:
        data["approvals"] = approvals.wire()
    emit(db, request.session_id, "approval.candidate", data, turn_id=request.turn_id, at=rt.now())
    for place in places_hearing(db, request, outcome in NOT_TAKEN, approvals is not None, responder.authenticator):
        emit(db, place, "approval.candidate", data, turn_id=None, at=rt.now())  # (engine/answers/timers.py)


def policy_context(rt: Runtime, db: DbSession, request: InputRequest, info: ResponseInfo, candidate_id: str,
                   judged_here: bool) -> ResponseContext:
    """The policy's view. The earlier candidates and the requester's person are read when the policy asks for
    them if it runs in this transaction (the default policy reads the requester's person only for a responder
    who is someone's), else now; people and groups are read in this transaction, or in reads of their own when
    the policy runs after it (engine/answers/directory.py)."""
    def earlier() -> list[ResponseInfo]:
        rows = db.execute(select(ResponseCandidate).where(
            ResponseCandidate.request_id == request.request_id, ResponseCandidate.outcome == CandidateOutcome.PENDING,
            ResponseCandidate.candidate_id != candidate_id,
        ).order_by(ResponseCandidate.created_at)).scalars()
        return [candidate_info(c) for c in rows]

    def requester_person() -> Person | None:
        return person_of(db, out.requested_by.principal_id) if out.requested_by else None

    session = db.get_one(Session, request.session_id)
    out = request_out(request)
    context = ResponseContext(request=out, response=info, session=session_info(session), earlier=earlier,
                              responder_person=linked_person(db, info.responder), requester_person_of=requester_person,
                              directory=PeopleDirectory(rt, db if judged_here else None))
    if not judged_here:
        _ = context.candidates, context.requester_person  # read now: the policy runs after the commit
    return context


def candidate_info(candidate: ResponseCandidate) -> ResponseInfo:
    """A stored candidate as a policy sees it (an approve keeps its edited input in its text column)."""
    text, data = read_stored(candidate.decision, candidate.text)
    return ResponseInfo(Principal.model_validate(candidate.responder), candidate.decision, text, data)


def judge(rt: Runtime, policy: ResponsePolicy, context: ResponseContext) -> tuple[str, str | None]:
    """Run a response policy: `allowed`, `pending`, `rejected`, `failed` or `timed-out`, with a reason."""
    try:
        result = policy(context)
        if inspect.isawaitable(result):
            result = asyncio.run(_bounded(result, rt.response_policy_timeout))
    except TimeoutError:
        return CandidateOutcome.TIMED_OUT, "the response policy did not answer in time"
    except Exception as exc:
        log.exception("response policy failed")
        return CandidateOutcome.FAILED, f"the response policy failed: {type(exc).__name__}"
    status = result.get("status") if isinstance(result, dict) else None
    if status in (CandidateOutcome.ALLOWED, CandidateOutcome.PENDING):
        return CandidateOutcome(status), None
    if status == CandidateOutcome.REJECTED:
        return CandidateOutcome.REJECTED, str(result.get("reason") or "refused by the response policy")
    return CandidateOutcome.FAILED, f"the response policy returned {result!r}"


async def _bounded(awaitable: Any, timeout: float) -> Any:
    return await asyncio.wait_for(awaitable, timeout)

