"""Reminders and escalation (DESIGN.md section 10, "Time"), carried out by sweep() from rows with a due time.

A request opened with a Schedule has a `request_timers` row per thing that falls due
(engine/answers/input_requests.py). Every sweep, in every worker, reads the rows due by their partial index and
fires each in a transaction of its own: it takes the request's session (as every writer of its events does), claims
the row by compare-and-set on its due time, and writes what happened as events in that same transaction, whose
deliveries go through the outbox. However many workers sweep, each reminder and escalation happens once; a worker
killed in between loses none (the row is still due) and doubles none (the claim committed with the events).

* A reminder: `input.reminded` in the request's session and every other place it is shown (its show_to places
  and those it escalated to); each channel that shows the request there reminds (engine/channels/delivery.py).
  The next one falls due `every` seconds later, up to `max`.
* An escalation: the request is also shown at its places (the session a message there reaches, opened if none:
  `request_places`), its approvers may settle it too (`escalation_approvers`: the response policy's path, and they
  are asked it: engine/store/access.py), and `input.escalated` in its own session says so (the audit, and its cards).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session as DbSession

from engine.answers.places import show_at
from engine.answers.settlement import places_of
from engine.jobs.runtime import Runtime
from engine.store.db import changed
from engine.store.events import emit
from engine.store.statuses import RequestStatus
from engine.store.tables import EscalationApprover, InputRequest, RequestPlace, RequestTimer, Session
from engine.turns.sessions import session_at
from engine.turns.transitions import lock_session

log = logging.getLogger(__name__)

BATCH = 100
"""At most this many timers fired by one sweep (the rest by the next)."""

_DUE = select(RequestTimer.request_id, RequestTimer.kind, InputRequest.session_id) \
    .join(InputRequest, InputRequest.request_id == RequestTimer.request_id) \
    .where(RequestTimer.due_at.is_not(None), RequestTimer.due_at <= bindparam("now")) \
    .order_by(RequestTimer.due_at).limit(bindparam("limit"))
_TIMER = select(RequestTimer).where(RequestTimer.request_id == bindparam("request"),
                                    RequestTimer.kind == bindparam("timer"))
_CLAIM = update(RequestTimer).where(
    RequestTimer.request_id == bindparam("request"), RequestTimer.kind == bindparam("timer"),
    RequestTimer.due_at == bindparam("seen")).values(due_at=bindparam("next"))
"""The compare-and-set that fires a timer: its due time moves on (None: done) only from the one that was read."""
_REMINDED = update(InputRequest).where(InputRequest.request_id == bindparam("request")) \
    .values(reminded=bindparam("count"))
_ESCALATED = update(InputRequest).where(InputRequest.request_id == bindparam("request")) \
    .values(escalated_at=bindparam("now"))
"""(The request is pending: every transaction that closes one holds its session, as `fire` does.)"""
_PLACES_ON = select(RequestPlace.session_id).join(Session, Session.id == RequestPlace.session_id) \
    .where(RequestPlace.request_id == bindparam("request"), Session.channel == bindparam("channel"))
_APPROVERS = select(EscalationApprover.principal_id).where(EscalationApprover.request_id == bindparam("request"))


@dataclass
class Fired:
    reminded: int = 0
    escalated: int = 0


def fire_timers(rt: Runtime, limit: int = BATCH) -> Fired:
    """Fire the timers that fell due (the earliest first); returns how many reminders and escalations this sweep
    made (another sweep may have made the rest). One that fails (a deadlock with a crossing escalation, say) is
    logged and stays due for the next sweep: it holds up neither the others nor the rest of the sweep."""
    fired = Fired()
    with rt.db.read() as db:
        due = db.execute(_DUE, {"now": rt.now(), "limit": limit}).all()
    for request_id, kind, session_id in due:
        try:
            made = fire(rt, request_id, kind, session_id)
        except Exception:
            log.exception("request %s: its %s timer failed; the next sweep tries again", request_id, kind)
            continue
        if made:
            if kind == "remind":
                fired.reminded += 1
            else:
                fired.escalated += 1
    return fired


def fire(rt: Runtime, request_id: str, kind: str, session_id: str) -> bool:
    """Fire one timer if it is still due and its request still open; False when another sweep fired it first
    (or the request closed: the timer is then done)."""
    with rt.transaction() as db:
        lock_session(db, session_id)
        now = rt.now()
        timer = db.execute(_TIMER, {"request": request_id, "timer": kind}).scalar_one_or_none()
        if timer is None or timer.due_at is None or timer.due_at > now:
            return False  # fired meanwhile
        request = db.get_one(InputRequest, request_id)
        if request.status != RequestStatus.PENDING:
            claim(db, timer, None)
            return False
        if kind == "remind":
            return remind(db, request, timer, now)
        return escalate(rt, db, request, timer, now)


def claim(db: DbSession, timer: RequestTimer, next_due: datetime | None) -> bool:
    return changed(db.connection(), _CLAIM, {"request": timer.request_id, "timer": timer.kind, "seen": timer.due_at,
                                             "next": next_due}) == 1


def remind(db: DbSession, request: InputRequest, timer: RequestTimer, now: datetime) -> bool:
    count = (request.reminded or 0) + 1
    last = count >= (timer.max or 1)
    if not claim(db, timer, None if last else now + timedelta(seconds=timer.every or 0)):
        return False
    db.connection().execute(_REMINDED, {"request": request.request_id, "count": count})
    data = {"requestId": request.request_id, "count": count, "max": timer.max,
            "approvers": sorted(escalated_approvers(db, request) or ())}
    emit(db, request.session_id, "input.reminded", data, turn_id=request.turn_id, at=now)
    for place in places_of(db, request):
        emit(db, place, "input.reminded", data, turn_id=None, at=now)
    return True


def escalate(rt: Runtime, db: DbSession, request: InputRequest, timer: RequestTimer, now: datetime) -> bool:
    if not claim(db, timer, None):
        return False
    db.connection().execute(_ESCALATED, {"request": request.request_id, "now": now})
    data = timer.data or {}
    places = places_for(rt, db, request, data.get("to", []))
    approvers = list(data.get("approvers", []))
    db.add_all(EscalationApprover(request_id=request.request_id, principal_id=principal_id)
               for principal_id in approvers)
    emit(db, request.session_id, "input.escalated", {
        "requestId": request.request_id, "to": [place for place, _ in places], "approvers": approvers,
    }, turn_id=request.turn_id, at=now)
    show_at(db, request, [session_id for _, session_id in places], "escalatedFrom", now)  # as if it opened there
    return True


def places_for(rt: Runtime, db: DbSession, request: InputRequest, places: list[dict[str, str]]) \
        -> list[tuple[dict[str, str], str]]:
    """Each escalation place (`{channel, address}`, the session address made when the request opened) with the
    session a message there reaches (opened if none); a place that is the request's own session is left out: it
    shows the request already."""
    found: dict[str, tuple[dict[str, str], str]] = {}
    for place in places:
        session_id = session_at(rt, db, place["channel"], place["address"], None)
        if session_id != request.session_id:
            found[session_id] = (place, session_id)
    return list(found.values())


def escalated_approvers(db: DbSession, request: InputRequest) -> frozenset[str] | None:
    """The principal ids an escalated request's escalation added as approvers; None when it has not escalated."""
    if request.escalated_at is None:
        return None
    return frozenset(db.execute(_APPROVERS, {"request": request.request_id}).scalars())


def places_hearing(db: DbSession, request: InputRequest, refused: bool, counted: bool, channel: str) -> list[str]:
    """The sessions besides its own told of a judged answer to a request: a counted approve every place that shows
    it (each shows the quorum's progress: a card is updated, a text channel tells the approver who answered there),
    a refusal each such place on the responder's `channel` (where they may have answered), anything else none."""
    if counted:
        return places_of(db, request)
    return places_on(db, request, channel) if refused else []


def places_on(db: DbSession, request: InputRequest, channel: str) -> list[str]:
    """The sessions on `channel` a request is shown at besides its own (its show_to places, those it escalated to):
    where a person of that channel may have answered it."""
    if not request.shown_elsewhere and request.escalated_at is None:
        return []
    return list(db.execute(_PLACES_ON, {"request": request.request_id, "channel": channel}).scalars())
