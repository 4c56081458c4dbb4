"""What a person's message does to a session (DESIGN.md rules 6-9): answer, steer, queue, cancel, note.

* A message that matches the first open request answers it (a session-limit prompt first, else the earliest),
  an external request's too (engine/answers/external.py: it waits in its place's session with the others) and one
  escalated to the session (engine/answers/timers.py: after the session's own), unless it is an agent's
  (engine/store/access.py: an agent never answers).
* A message that answers nothing, from the turn's own person, steers: open approvals resolve `ignored`,
  open questions `cancelled`, and the model reads the message next. With `turn_policy="queue"` it waits for
  the turn to end instead, unless an approval is held (a held turn cannot end without a person).
* Messages from other people wait until the turn ends (a queued turn).
* An answer to a request that already closed authorizes nothing: it becomes a user message saying so.
* Cancel stops the turn; only the turn's own person may, or an operator (anyone verified, when that person was
  anonymous): cancelling closes its requests without their response policy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine.answers.input_requests import open_in_order, open_shown_in
from engine.answers.options import typed_answer
from engine.answers.settlement import close_request
from engine.answers.submit import ResponseResult, submit_responses
from engine.errors import AlreadyApplied, Conflict, InvalidInput, NotPermitted, RequestClosed
from engine.jobs.runtime import Runtime
from engine.people import one_person
from engine.protocol import InputResponse, Principal
from engine.store.access import answers_requests
from engine.store.events import add_message, emit_received
from engine.store.statuses import CALL_DONE, Outcome, ResultStatus, TurnStatus
from engine.store.tables import InputRequest, Session, ToolCall, Turn
from engine.turns.calls import reject_call
from engine.turns.sessions import queue_turn
from engine.turns.transitions import active_turn, end_turn, latest_run, lock_session, lock_turn, schedule_resume

TurnPolicy = Literal["steer", "queue"]


@dataclass
class Posted:
    """What a message did: `answered` a request, `steered` the turn, `queued` or `started` a turn, or was `noted`."""

    effect: Literal["answered", "steered", "queued", "started", "noted"]
    turn_id: str | None
    """None when it answered an external request, or one escalated to the session, and no turn is under way."""
    results: list[ResponseResult] = field(default_factory=list)


def post_message(
    rt: Runtime, session_id: str, principal: Principal | None, text: str, turn_policy: TurnPolicy = "steer",
    claim: Callable[[DbSession], bool] | None = None,
) -> Posted:
    """Apply a person's message. `claim` (an inbound item's compare-and-set) runs in the same transaction:
    when it returns False the message was already applied: AlreadyApplied, and nothing changes."""
    text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL; no channel means one
    if not text.strip():
        raise InvalidInput("a message needs some text")
    with rt.transaction() as db:
        session = lock_session(db, session_id)
        if claim is not None and not claim(db):
            raise AlreadyApplied(session_id)
        open_requests = open_shown_in(db, session_id)  # an external request's too, and those escalated here
        answers = principal is not None and answers_requests(principal)  # an agent's message never answers
        answer = typed_answer(open_requests, text, principal) if answers else None
        turn = active_turn(db, session_id)
        started = turn is not None and not not_started(db, turn)
        turn_id = turn.id if turn is not None and started else None
        if answer is not None and principal is not None:
            emit_received(db, session_id, turn_id, text, principal.wire(), rt.now())
        elif turn is None or not started:
            return Posted("started" if turn is None else "queued", queue_turn(rt, db, session, principal, text))
        else:
            return to_turn(rt, db, session, lock_turn(db, turn.id), open_requests, principal, text, turn_policy)
    try:
        return Posted("answered", turn_id, submit_responses(rt, principal, [answer]))
    except RequestClosed:  # settled by someone else since the message was read: a late answer (rule 8)
        late_answer(rt, principal, answer)
        return Posted("noted", turn_id)


def to_turn(rt: Runtime, db: DbSession, session: Session, turn: Turn, open_requests: list[InputRequest],
            principal: Principal | None, text: str, turn_policy: TurnPolicy) -> Posted:
    """A message that answers nothing, to a session whose turn has started: a note while its session-limit prompt
    waits, a steer from the turn's own person (which closes the turn's own requests only), else a queued turn."""
    own = [r for r in open_requests if r.turn_id == turn.id]
    if own and own[0].kind == "session-limit" and owns(db, turn, principal):
        note(rt, db, turn, principal, text)  # read once the person lets the turn continue
        return Posted("noted", turn.id)
    if owns(db, turn, principal) and (turn_policy == "steer" or holds_approval(own)):
        steer(rt, db, turn, own, principal, text)
        return Posted("steered", turn.id)
    return Posted("queued", queue_turn(rt, db, session, principal, text))


def not_started(db: DbSession, turn: Turn) -> bool:
    """A turn queued before its first run: a message waits behind it. A turn queued to resume (an answer
    settled its requests, or its worker died) has started: its person steers it as a running one."""
    return turn.status == TurnStatus.QUEUED and latest_run(db, turn.id) is None


def owns(db: DbSession, turn: Turn, principal: Principal | None) -> bool:
    """Whether `principal` is the turn's own person: the principal that asked, or another of its person's."""
    requester = turn.requested_by
    if principal is None or requester is None:
        return principal is None and requester is None
    return one_person(db, principal, Principal.model_validate(requester))


def may_cancel(db: DbSession, turn: Turn, principal: Principal | None) -> bool:
    """The turn's own person, an operator, or anyone verified when the turn's person was anonymous."""
    if principal is not None and (principal.authenticator == "operator" or turn.requested_by is None):
        return True
    return owns(db, turn, principal)


def holds_approval(open_requests: list[InputRequest]) -> bool:
    return any(r.kind == "tool-approval" for r in open_requests)


def note(rt: Runtime, db: DbSession, turn: Turn, principal: Principal | None, text: str) -> None:
    """Add a user message to the turn's transcript; the model reads it at its next step."""
    who = principal.wire() if principal else None
    add_message(db, turn.session_id, turn.id, "user", content=text, principal=who)
    emit_received(db, turn.session_id, turn.id, text, who, rt.now())


def steer(rt: Runtime, db: DbSession, turn: Turn, open_requests: list[InputRequest], principal: Principal | None,
          text: str) -> None:
    note(rt, db, turn, principal, text)
    for request in open_requests:
        outcome = Outcome.IGNORED if request.kind == "tool-approval" else Outcome.CANCELLED
        close_request(rt, db, request.request_id, outcome=outcome, response=None, responder=principal)
    schedule_resume(rt, db, turn)


def cancel_turn(rt: Runtime, session_id: str, principal: Principal | None) -> str:
    """Stop the session's current turn: open requests resolve `cancelled`, stopped calls get
    `action.result{cancelled}`, then `turn.cancelled` and `session.waiting` (or the next queued turn starts)."""
    with rt.transaction() as db:
        lock_session(db, session_id)
        current = active_turn(db, session_id)
        if current is None:
            raise Conflict("the session has no turn to cancel", {"sessionId": session_id})
        turn = lock_turn(db, current.id, session_id)
        if not may_cancel(db, turn, principal):
            raise NotPermitted(f"only {Principal.model_validate(turn.requested_by).display_name} or an operator may "
                               "cancel this turn", {"sessionId": session_id, "turnId": turn.id})
        for request in open_in_order(db, InputRequest.turn_id == turn.id):
            close_request(rt, db, request.request_id, outcome=Outcome.CANCELLED, response=None, responder=principal)
        stopped = db.execute(select(ToolCall).where(ToolCall.turn_id == turn.id, ToolCall.status.not_in(CALL_DONE))
                             .order_by(ToolCall.step, ToolCall.position)).scalars()
        for call in stopped:
            reject_call(rt, db, call, "Cancelled: the turn was cancelled", session_id, status=ResultStatus.CANCELLED)
        run = latest_run(db, turn.id)
        end_turn(rt, db, turn, run.id if run is not None else None, TurnStatus.CANCELLED)
        return turn.id


def receive_responses(rt: Runtime, principal: Principal, responses: list[InputResponse],
                      claim: Callable[[DbSession], bool] | None = None) -> list[ResponseResult]:
    """Channel answers (button clicks): like submit_responses, but a late answer to a closed request becomes
    a user message saying so (DESIGN.md rule 8) instead of an error; the same answer twice is ignored.
    `claim` (the inbound item's compare-and-set) goes with the last response (see submit_responses), or runs
    on its own after a late one."""
    results = []
    for position, response in enumerate(responses, start=1):
        last = position == len(responses)
        try:
            results.extend(submit_responses(rt, principal, [response], claim=claim if last else None))
        except RequestClosed:
            late_answer(rt, principal, response)
            if last and claim is not None:
                with rt.transaction() as db:
                    claim(db)
    return results


def late_answer(rt: Runtime, principal: Principal, response: InputResponse) -> None:
    """An answer to a request already closed becomes a user message of the session's agent saying so; an external
    request's agent runs elsewhere and hears only the outcome, so there is nobody to tell."""
    with rt.transaction() as db:
        request = db.get_one(InputRequest, response.request_id)
        if request.turn_id is None:
            return
        same = principal.wire() == request.responder and (request.response or {}).get("optionId") == response.option_id
        if same:
            return  # a double click
        labels = {o["id"]: o["label"] for o in request.options}
        answer = labels.get(response.option_id or "", response.text or "")
        text = (f"{principal.display_name} answered \"{answer}\" to \"{request.prompt}\", but that request was "
                f"already closed ({request.outcome}); nothing was done with this answer.")
        turn = active_turn(db, request.session_id)
        if turn is None or not_started(db, turn):
            queue_turn(rt, db, lock_session(db, request.session_id), principal, text)
        else:
            note(rt, db, turn, principal, text)
