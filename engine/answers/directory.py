"""Who is who for a response policy (engine/policies.py `Directory`): the gateway's people and groups
(engine/people.py) and platform groups (engine/channels/groups.py, through the runtime's channels).

A policy judged in the transaction that stores its candidates reads with that transaction's session; one judged
later (it may take its time) reads in a short read of its own each time it asks, holding no transaction while a
platform is asked.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from sqlalchemy.orm import Session as DbSession

from engine.channels.groups import platform_kind
from engine.jobs.runtime import Runtime
from engine.people import expand

T = TypeVar("T")


class PeopleDirectory:
    """`Directory` over the database (`db`: the transaction judging; None: a read of its own per question) and
    the runtime's platform groups."""

    def __init__(self, rt: Runtime, db: DbSession | None = None) -> None:
        self.rt = rt
        self.db = db

    def members(self, who: Iterable[str]) -> frozenset[str]:
        items = list(who)
        local = [item for item in items if platform_kind(item) is None]
        found: set[str] = set()
        if local:
            found |= self.read(lambda db: set().union(*(expand(db, item) for item in local)))
        for item in items:
            if platform_kind(item) is not None:
                found |= self.rt.groups.members(item)
        return frozenset(found)

    def same_person(self, principal_id: str) -> frozenset[str]:
        return frozenset(self.read(lambda db: expand(db, principal_id)))

    def read(self, question: Callable[[DbSession], T]) -> T:
        with self.session() as db:
            return question(db)

    @contextmanager
    def session(self) -> Iterator[DbSession]:
        if self.db is not None:
            yield self.db
        else:
            with self.rt.db.read() as db:
                yield db
