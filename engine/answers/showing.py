"""Where a request is shown when it opens (issue 28, docs/right-people.md): its `show_to` places and whether its own
session's channel shows it. A `Showing` is only the plan; engine/answers/places.py carries it out as the request
opens."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session as DbSession

from engine.answers.schedules import Place, place_of
from engine.store.tx import Tx


@dataclass(frozen=True)
class PersonPlace:
    """A direct conversation with the person `name` (engine/people.py)."""

    name: str


@dataclass(frozen=True)
class GroupPlace:
    """Each member of the group `name`, as a PersonPlace."""

    name: str


ShowPlace = Place | PersonPlace | GroupPlace


@dataclass(frozen=True)
class Showing:
    """Where a request is shown when it opens: its own session's channel (`in_session`) and the places `to`."""

    to: tuple[ShowPlace, ...] = ()
    in_session: bool = True


IN_SESSION = Showing()


def showing(show_to: Any = None, show_in_session: bool = True) -> Showing:
    """A checked Showing; ValueError naming what is wrong."""
    if not isinstance(show_in_session, bool):
        raise ValueError(f"show_in_session is True or False, not {show_in_session!r}")
    places = show_places_of(show_to)
    if not show_in_session and not places:
        raise ValueError("show_in_session=False needs show_to: a request must be shown somewhere")
    return Showing(places, show_in_session)


def show_places_of(value: Any, name: str = "show_to") -> tuple[ShowPlace, ...]:
    """A place (`{channel, address}`, `{person}` or `{group}`) or a list of them."""
    if value is None:
        return ()
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ValueError(f'{name} is a place ({{"channel": ..., "address": {{...}}}}, {{"person": "<name>"}} or '
                         f'{{"group": "<name>"}}) or a list of places')
    return tuple(show_place_of(item) for item in items)


def show_place_of(item: Any) -> ShowPlace:
    if isinstance(item, Mapping) and len(item) == 1 and ("person" in item or "group" in item):
        key, value = next(iter(item.items()))
        if not isinstance(value, str) or not value.strip():
            raise ValueError(f'a {key} place is {{"{key}": "<name>"}}, not {dict(item)!r}')
        return PersonPlace(value.strip()) if key == "person" else GroupPlace(value.strip())
    return place_of(item, also='{"person": "<name>"}, {"group": "<name>"} or ')


def remember(db: DbSession, request_id: str, shown: Showing) -> None:
    """Keep a request's places until `announce` shows it there (open_request calls this)."""
    if shown.to:
        Tx.of(db).showing[request_id] = shown
