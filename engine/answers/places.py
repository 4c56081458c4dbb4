"""Where a request is shown besides its own session (issue 28, DESIGN.md section 10 "Place"; docs/right-people.md).

A request may be shown at `show_to` places when it opens (an ApprovalPolicy's, or `to` of POST /api/requests):

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

A place that cannot be resolved when the request opens (an unknown person or group, nobody reachable, a channel
not configured, a platform that fails) is logged and left out: the request still opens, and shows elsewhere.
"""

from __future__ import annotations

import logging
from datetime import datetime

from sqlalchemy.orm import Session as DbSession

from engine.answers.schedules import Place
from engine.answers.showing import PersonPlace, Showing, ShowPlace
from engine.channels.contract import Reaching
from engine.jobs.runtime import Runtime
from engine.people import PERSON, group_members, person_principals
from engine.store.events import emit, emit_requested
from engine.store.tables import InputRequest, RequestPlace
from engine.store.tx import Tx
from engine.turns.sessions import session_at

log = logging.getLogger(__name__)


def announce(rt: Runtime, db: DbSession, session_id: str, turn_id: str | None, requests: list[InputRequest],
             at: datetime) -> None:
    """`input.requested` for a batch of requests that just opened in `session_id`, and each one shown at its
    `show_to` places."""
    emit_requested(db, session_id, turn_id, requests, at)
    waiting: dict[str, Showing] = Tx.of(db).showing
    for request in requests:
        shown = waiting.pop(request.request_id, None)
        if shown is not None:
            show_at(db, request, place_sessions(rt, db, request, shown), "shownFrom", at)


def show_at(db: DbSession, request: InputRequest, session_ids: list[str], origin: str, at: datetime) -> None:
    """Show an open request in the sessions `session_ids` besides its own: a `request_places` row and an
    `input.requested` there naming (as `origin`: `shownFrom`, `escalatedFrom`) the session it came from."""
    if session_ids:
        request.shown_elsewhere = True
    db.add_all(RequestPlace(request_id=request.request_id, session_id=session_id) for session_id in session_ids)
    for session_id in session_ids:
        emit(db, session_id, "input.requested", {"requestIds": [request.request_id], origin: request.session_id},
             turn_id=None, at=at)


def place_sessions(rt: Runtime, db: DbSession, request: InputRequest, shown: Showing) -> list[str]:
    """The sessions of a request's places (each once), opened where none is; the request's own session is left
    out (it shows the request already, or, with show_in_session=False, is told to after all)."""
    found: dict[str, None] = {}
    for channel, address in dict.fromkeys(a for place in shown.to for a in addresses(rt, db, request, place)):
        found[session_at(rt, db, channel, address, None)] = None
    if request.session_id in found:
        found.pop(request.session_id)
        request.shown_in_session = True
    return list(found)


def addresses(rt: Runtime, db: DbSession, request: InputRequest, place: ShowPlace) -> list[tuple[str, str]]:
    """(channel, session address) of each conversation a place stands for; what cannot be reached is logged."""
    try:
        if isinstance(place, Place):
            adapter = rt.channels.get(place.channel)
            if adapter is None:
                raise ValueError(f"channel {place.channel!r} is not configured")
            return [(place.channel, adapter.address(dict(place.address)))]
        if isinstance(place, PersonPlace):
            return [reach(rt, db, place.name)]
        members = group_members(db, place.name)
        if not members:
            raise ValueError(f"group {place.name!r} has no members")
    except Exception as exc:
        log.error("request %s is not shown at %s: %s", request.request_id, place, exc)
        return []
    found = []
    for member in members:
        name = member.removeprefix(PERSON)
        try:
            found.append(reach(rt, db, name) if member.startswith(PERSON) else reach_principal(rt, member))
        except Exception as exc:
            log.error("request %s is not shown to %s of group %s: %s", request.request_id, name, place.name, exc)
    return found


def reach(rt: Runtime, db: DbSession, person: str) -> tuple[str, str]:
    """(channel, session address) of a direct conversation with `person`, on the first of their linked principals
    a configured channel can write to; ValueError when none can (or the person is unknown)."""
    principals = person_principals(db, person)
    if not principals:
        raise ValueError(f"no person {person!r}")
    for principal_id in principals:
        found = direct(rt, principal_id)
        if found is not None:
            return found
    raise ValueError(f"no configured channel can write to {person!r} on their own ({', '.join(principals)})")


def reach_principal(rt: Runtime, principal_id: str) -> tuple[str, str]:
    found = direct(rt, principal_id)
    if found is None:
        raise ValueError(f"no configured channel can write to {principal_id} on its own")
    return found


def direct(rt: Runtime, principal_id: str) -> tuple[str, str] | None:
    for name, adapter in rt.channels.items():
        if isinstance(adapter, Reaching):
            address = adapter.direct(principal_id)
            if address is not None:
                return name, address
    return None
