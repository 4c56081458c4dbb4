"""Where a request is shown besides its own session (issue 28, DESIGN.md section 10 "Place"; docs/right-people.md).

A request may be shown at `show_to` places when it opens (an ApprovalPolicy's, a `ctx.ask`'s, or `to` of
POST /api/requests):

* a channel address, as POST /api/sessions takes it (`{"channel": "slack", "address": {"channel": "C1"}}`);
* `{"person": "alice"}`: a direct conversation on the first of the person's linked principals that a configured
  channel can write to on its own (engine.channels.contract.Reaching: a Slack DM opened with `conversations.open`,
  an SMS to their number);
* `{"group": "finance"}`: each member so (a member is a person, or a principal id reached as a person's is).

Each place is the session a message there reaches (opened if none), and the request is shown there the way an
escalation shows it (engine/answers/timers.py): a `request_places` row, and an `input.requested` event there
(`shownFrom`: the session it came from). So every place shows it, a reply there answers it, it settles once, and
every place then updates its prompt (engine/answers/settlement.py); a text channel shows it in turn with the other
requests of that place, whatever session they come from. `show_in_session=False` keeps it out of its own
session's channel (the console, the API and the event stream still have it).

No platform is asked while the transaction that opens the request holds its locks: a place whose address is known
(a channel address, a phone number) is shown in that transaction; a direct conversation its platform must open
(a Slack DM) is shown by a `show_direct` job that the transaction records in the outbox, so it is never lost: while
the platform cannot answer, the job's row stays and the sweep runs it again.

A place that cannot be resolved when the request opens (an unknown person or group, nobody reachable: GitHub has
no direct messages; a channel not configured) is logged and named in the `input.requested` event's `notShown`:
the request still opens, and shows elsewhere. POST /api/requests refuses such a place instead (gateway/external.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine.answers.schedules import Place
from engine.answers.showing import GroupPlace, PersonPlace, Showing, ShowPlace
from engine.channels.contract import ChannelUnavailable, Reaching
from engine.jobs.outbox import TryLater
from engine.jobs.runtime import Runtime
from engine.people import PERSON, group_members, person_principals
from engine.store.events import emit, emit_requested
from engine.store.statuses import RequestStatus
from engine.store.tables import InputRequest, RequestPlace
from engine.store.tx import Tx
from engine.turns.sessions import session_at
from engine.turns.transitions import lock_session

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Direct:
    """A direct conversation with the person behind `principal_id`, which `channel` writes to on its own."""

    channel: str
    principal_id: str


Target = tuple[str, str] | Direct
"""Where a place shows a request: a (channel, session address), or a direct conversation to open."""


def announce(rt: Runtime, db: DbSession, session_id: str, turn_id: str | None, requests: list[InputRequest],
             at: datetime) -> None:
    """`input.requested` for a batch of requests that just opened in `session_id` (naming in `notShown` the places
    left out), and each one shown at its `show_to` places."""
    waiting: dict[str, Showing] = Tx.of(db).showing
    not_shown: list[dict[str, Any]] = []
    shown_at = []
    for request in requests:
        shown = waiting.pop(request.request_id, None)
        if shown is not None:
            shown_at.append((request, place_sessions(rt, db, request, shown, not_shown)))
    emit_requested(db, session_id, turn_id, requests, at, not_shown)
    for request, session_ids in shown_at:
        show_at(db, request, session_ids, "shownFrom", at)


def show_at(db: DbSession, request: InputRequest, session_ids: list[str], origin: str, at: datetime) -> None:
    """Show an open request in the sessions `session_ids` besides its own: a `request_places` row and an
    `input.requested` there naming (as `origin`: `shownFrom`, `escalatedFrom`) the session it came from."""
    if session_ids:
        request.shown_elsewhere = True
    db.add_all(RequestPlace(request_id=request.request_id, session_id=session_id) for session_id in session_ids)
    for session_id in session_ids:
        emit(db, session_id, "input.requested", {"requestIds": [request.request_id], origin: request.session_id},
             turn_id=None, at=at)


def place_sessions(rt: Runtime, db: DbSession, request: InputRequest, shown: Showing,
                   not_shown: list[dict[str, Any]]) -> list[str]:
    """The sessions of a request's places whose address is known now (each once, opened where none is); a
    direct conversation its platform opens gets a `show_direct` job instead. The request's own session is left
    out (it shows the request already, or, with show_in_session=False, is told to after all). What cannot be
    reached is appended to `not_shown`."""
    found: dict[str, None] = {}
    targets = [t for place in shown.to for t in place_targets(rt, db, request.request_id, place, not_shown)]
    for target in dict.fromkeys(targets):
        if isinstance(target, Direct):
            rt.enqueue(db, "show_direct", request.request_id, target.channel, target.principal_id)
        else:
            found[session_at(rt, db, *target, None)] = None
    if request.session_id in found:
        found.pop(request.session_id)
        request.shown_in_session = True
    return list(found)


def place_targets(rt: Runtime, db: DbSession, request_id: str | None, place: ShowPlace,
                  not_shown: list[dict[str, Any]]) -> list[Target]:
    """Where a place shows a request, asking no platform; what cannot be reached is logged and appended to
    `not_shown` as `{requestId, place, reason}` (POST /api/requests checks a body's places so, with no request)."""
    problems: list[str] = []
    found: list[Target] = []
    if isinstance(place, Place):
        adapter = rt.channels.get(place.channel)
        try:
            if adapter is None:
                raise ValueError(f"channel {place.channel!r} is not configured")
            found.append((place.channel, adapter.address(dict(place.address))))
        except ValueError as exc:
            problems.append(str(exc))
    elif isinstance(place, PersonPlace):
        try:
            found.append(known(rt, db, place.name))
        except ValueError as exc:
            problems.append(str(exc))
    else:
        found, problems = members(rt, db, place)
    for reason in problems:
        if request_id is not None:
            log.error("request %s is not shown at %s: %s", request_id, place, reason)
        not_shown.append({"requestId": request_id, "place": place_wire(place), "reason": reason})
    return found


def members(rt: Runtime, db: DbSession, group: GroupPlace) -> tuple[list[Target], list[str]]:
    """Where a group place shows a request (each member reached as a person), and why a member cannot be."""
    names = group_members(db, group.name)
    if not names:
        return [], [f"group {group.name!r} has no members"]
    found: list[Target] = []
    problems = []
    for member in names:
        try:
            found.append(known(rt, db, member.removeprefix(PERSON)) if member.startswith(PERSON)
                         else reach(rt, member, [member]))
        except ValueError as exc:
            problems.append(str(exc))
    return found, problems


def place_wire(place: ShowPlace) -> dict[str, Any]:
    if isinstance(place, Place):
        return place.wire()
    return {"person": place.name} if isinstance(place, PersonPlace) else {"group": place.name}


def known(rt: Runtime, db: DbSession, person: str) -> Target:
    """A direct conversation with `person`, on the first of their linked principals a configured channel can write
    to on its own; ValueError naming why none can (or that the person is unknown)."""
    principals = person_principals(db, person)
    if not principals:
        raise ValueError(f"no person {person!r}")
    return reach(rt, repr(person), principals)


def reach(rt: Runtime, who: str, principals: list[str]) -> Target:
    """A direct conversation on the first of `principals` a configured channel writes to on its own: (channel,
    address) where the channel knows it now, else a Direct for `show_direct`; ValueError naming why none can."""
    for principal_id in principals:
        for name, adapter in rt.channels.items():
            if isinstance(adapter, Reaching) and adapter.reaches(principal_id):
                return Direct(name, principal_id) if adapter.opens_direct else (name, adapter.direct(principal_id))
    why = f"no configured channel can write to {who} on their own ({', '.join(principals)})"
    if any(principal_id.startswith("github:") for principal_id in principals):
        why += ("; GitHub has no direct messages: link a Slack user or a phone number to them, or show the request "
                "on a GitHub issue they watch")
    raise ValueError(why)


def show_direct(rt: Runtime, request_id: str, channel: str, principal_id: str) -> None:
    """Job body: show an open request in the direct conversation with `principal_id` that `channel`'s platform
    opens (Slack's conversations.open), asked outside any transaction. While the platform cannot answer, the job's
    outbox row stays and the sweep runs it again; a platform that refuses leaves the place out (logged). Safe to
    run twice: a request shown there already, or closed meanwhile, is left as it is."""
    adapter = rt.channels.get(channel)
    with rt.db.read() as db:
        found = db.execute(select(InputRequest.status, InputRequest.session_id)
                           .where(InputRequest.request_id == request_id)).first()
    if found is None or found.status != RequestStatus.PENDING or not isinstance(adapter, Reaching):
        return
    try:
        address = adapter.direct(principal_id)
    except ChannelUnavailable as exc:
        raise TryLater(f"request {request_id} waits to be shown to {principal_id}: {exc}") from exc
    except Exception as exc:
        log.error("request %s is not shown to %s: %s", request_id, principal_id, exc)
        return
    with rt.transaction() as db:
        lock_session(db, found.session_id)  # one job at a time shows a request: its places are read under it
        request = db.get_one(InputRequest, request_id)
        if request.status != RequestStatus.PENDING:
            return
        session_id = session_at(rt, db, channel, address, None)
        now = rt.now()
        if session_id == request.session_id:  # their direct conversation is where it was asked
            if not request.shown_in_session:
                request.shown_in_session = True
                emit_requested(db, session_id, request.turn_id, [request], now)
        elif db.get(RequestPlace, (request_id, session_id)) is None:
            show_at(db, request, [session_id], "shownFrom", now)
