"""An answer settles its request exactly once: the rule, and closing a request whoever closes it (a response, a
steer, a cancel, expiry).

Two checks, both under the turn's lock (`transitions.lock_for`), make it so:

* A candidate is judged once (`judged_before`): its first verdict stands, whether the call that stored it or a
  sweep that found it unjudged (`submit.judge_again`) applies it; the verdict is written by `judge_candidate`.
* A request closes once (`close_request`): a compare-and-set on its pending status; whoever loses it is told
  `ALREADY_SETTLED` (the candidate is `stale`).

`engine.answers.submit.settle` applies a verdict through both. The layer below them is delivery dedupe, in
engine/channels/inbound.py: a channel's retry of one item is stored once (`insert_once`) and applied once
(`mark_processed`, or the `claim` `submit_responses` runs).
"""

from __future__ import annotations

from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.orm import Session as DbSession
from sqlalchemy.orm.attributes import set_committed_value

from engine.answers.edits import input_grant, input_hash
from engine.jobs.callbacks import owe_callback
from engine.jobs.runtime import Runtime
from engine.protocol import Principal, app_reason
from engine.store.db import changed, write_row
from engine.store.events import emit
from engine.store.statuses import CallStatus, CandidateOutcome, Outcome, RequestStatus, ResultStatus
from engine.store.tables import ApprovalGrant, InputRequest, RequestPlace, ResponseCandidate, ToolCall, Turn
from engine.store.tx import Tx
from engine.turns.calls import reject_call

_CLOSE = update(InputRequest) \
    .where(InputRequest.request_id == bindparam("request"), InputRequest.status == RequestStatus.PENDING) \
    .values({column: bindparam(column) for column in ("status", "outcome", "response", "responder", "resolved_at")})
"""The compare-and-set that closes a request, built once (see turns/transitions.py); its values are named after their
columns."""
_INSERT_GRANT = insert(cast(Table, ApprovalGrant.__table__))
_PLACES = select(RequestPlace.session_id).where(RequestPlace.request_id == bindparam("request"))
_CANDIDATES = cast(Table, ResponseCandidate.__table__)
_INSERT_CANDIDATE = insert(_CANDIDATES)
_JUDGE_CANDIDATE = update(_CANDIDATES).where(_CANDIDATES.c.candidate_id == bindparam("candidate"))
"""Built once (see turns/transitions.py); their parameters are named after their columns."""
_JUDGED = select(_CANDIDATES.c.outcome, _CANDIDATES.c.reason, _CANDIDATES.c.judged_at) \
    .where(_CANDIDATES.c.candidate_id == bindparam("candidate"))

ALREADY_SETTLED = "the request was already settled"
"""The reason a candidate that lost `close_request`'s compare-and-set is `stale`."""
REJECTION_NOTES: dict[str, str] = {
    Outcome.IGNORED: "Ignored: the person sent a new message instead of answering",
    Outcome.CANCELLED: "Cancelled: the turn was cancelled",
    Outcome.EXPIRED: "Expired: nobody answered in time",
}


def close_request(
    rt: Runtime, db: DbSession, request_id: str, *, outcome: str, response: dict[str, Any] | None,
    responder: Principal | None,
) -> InputRequest | None:
    """Settle one request if it is still pending; None when someone else settled it first. The compare-and-set
    runs on the connection (nothing is flushed early); a loaded request is given the values it wrote. Every other
    place it is shown (show_to, escalation) hears it closed too (its prompt there is updated). An external
    request's callback falls due; an agent's approval authorises (or denies) its tool call; a session-limit
    prompt's `continue` raises the step budget."""
    who = responder.wire() if responder else None
    values = {"status": RequestStatus.RESOLVED, "outcome": outcome, "response": response, "responder": who,
              "resolved_at": rt.now()}
    won = changed(db.connection(), _CLOSE, {"request": request_id, **values}) == 1
    if not won:
        return None
    request = db.get_one(InputRequest, request_id)
    for key, value in values.items():
        set_committed_value(request, key, value)
    if request.kind == "tool-approval" and outcome in (Outcome.APPROVED, Outcome.DENIED):
        emit(db, request.session_id, "approval.settled",
             {"requestId": request_id, "outcome": outcome, "responder": who}, turn_id=request.turn_id, at=rt.now())
    resolved = {"resolutions": [{
        "requestId": request_id, "kind": request.kind, "outcome": outcome, "response": response, "responder": who,
    }]}
    emit(db, request.session_id, "input.resolved", resolved, turn_id=request.turn_id, at=rt.now())
    for place in places_of(db, request):
        emit(db, place, "input.resolved", resolved, turn_id=None, at=rt.now())
    if request.turn_id is None:  # an external request: no turn waits on it, its callback hears it
        owe_callback(rt, db, request_id)
    elif request.kind == "tool-approval":
        authorise_call(rt, db, request, responder)
    elif request.kind == "session-limit" and outcome == Outcome.ANSWERED:
        turn = db.get_one(Turn, request.turn_id)
        if (response or {}).get("optionId") == "continue":
            turn.step_budget = (turn.step_budget or 0) + (rt.agent.max_steps or 0)
    return request


def places_of(db: DbSession, request: InputRequest) -> list[str]:
    """The sessions besides its own that show a request (read only when it has some)."""
    if not request.shown_elsewhere and request.escalated_at is None:
        return []
    return list(db.execute(_PLACES, {"request": request.request_id}).scalars())


def authorise_call(rt: Runtime, db: DbSession, request: InputRequest, responder: Principal | None) -> None:
    """The call behind a settled approval: approved (and a once() grant, unless the app approved it on timeout:
    a grant takes a person's explicit approve), or rejected with an attributed note. An approve with an edited
    input gives the call that input (and its hash: rule 10), and grants that input only."""
    call = db.get_one(ToolCall, request.call_id)
    if request.outcome == Outcome.APPROVED and responder is not None:
        edited = (request.response or {}).get("input")
        new_input = {"input": edited, "input_hash": input_hash(edited)} if edited is not None else {}
        write_row(db, call, status=CallStatus.APPROVED, responder=responder.wire(), updated_at=rt.now(), **new_input)
        tool = rt.agent.tools.get(call.tool)
        if tool is not None and app_reason(responder) is None:
            key = tool.approval_key if edited is None else input_grant(tool.approval_key, edited)
            db.connection().execute(_INSERT_GRANT, {
                "session_id": request.session_id, "approval_key": key, "granted_by": responder.wire(),
                "request_id": request.request_id, "created_at": rt.now()})
        return
    if request.outcome == Outcome.DENIED and responder is not None:
        note = (request.response or {}).get("text")
        reason = f"Denied by {responder.display_name}" + (f": {note}" if note else "")
    else:
        reason = REJECTION_NOTES.get(request.outcome or "", "Not approved")
    cancelled = request.outcome == Outcome.CANCELLED
    reject_call(rt, db, call, reason, request.session_id,
                status=ResultStatus.CANCELLED if cancelled else ResultStatus.REJECTED)


def judged_before(db: DbSession, candidate_id: str) -> tuple[str, str | None] | None:
    """The verdict (outcome, reason) a stored candidate already has (a sweep judged it while a slow policy still
    ran: the first verdict stands), read under the turn's lock; None if it has none. A candidate judged where it
    is stored has none yet."""
    if candidate_id in Tx.of(db).unjudged:
        return None
    done = db.execute(_JUDGED, {"candidate": candidate_id}).one()
    return None if done.judged_at is None else (done.outcome, done.reason)


def judge_candidate(rt: Runtime, db: DbSession, candidate_id: str, outcome: str = CandidateOutcome.PENDING,
                    reason: str | None = None) -> None:
    """Record the verdict: a candidate judged where it is stored is inserted with it, a stored one updated."""
    verdict = {"judged_at": rt.now(), "outcome": outcome, "reason": reason}
    row = Tx.of(db).unjudged.pop(candidate_id, None)
    if row is not None:
        insert_candidate(db, {**row, **verdict})
    else:
        db.connection().execute(_JUDGE_CANDIDATE, {"candidate": candidate_id, **verdict})


def insert_candidate(db: DbSession, row: dict[str, Any]) -> None:
    """Store a candidate's row (its columns by name)."""
    db.connection().execute(_INSERT_CANDIDATE, row)
