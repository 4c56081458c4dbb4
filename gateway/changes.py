"""One poller per process that tells the open event streams when what they show has changed.

A stream waits here between its reads instead of reading the database itself: while any stream waits, one
thread reads, every POLL_SECONDS, the version of everything waited on (one query per `Topic`, whatever the number
of streams) and wakes each waiter whose version passed the one it has. 200 streams of a process cost that process
4 small queries a second, not 800. A waiter is a blocking one (a thread of `hitl serve`) or an asyncio one (an
event loop serving many streams, gateway/asgi.py) alike.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from itertools import islice

from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session as DbSession

from engine.store.db import Database
from engine.store.tables import Session

log = logging.getLogger(__name__)

POLL_SECONDS = 0.25  # how often the versions are read while a stream waits: how soon a stream sees a new event
KEYS_PER_QUERY = 500  # keys of one topic read per query (databases limit a statement's parameters)


@dataclass(frozen=True)
class Topic:
    """A kind of thing streams wait on. `versions(db, keys)` reads each key's version: a number that grows with
    every change. A key it does not return (a deleted session, say) wakes its waiters, whose read then says so."""

    name: str
    versions: Callable[[DbSession, Collection[str]], Mapping[str, int]]


def session_event_counts(db: DbSession, keys: Collection[str]) -> Mapping[str, int]:
    rows = db.execute(select(Session.id, Session.event_seq).where(Session.id.in_(keys)))
    return {session_id: event_seq for session_id, event_seq in rows}


SESSION_EVENTS = Topic("session-events", session_event_counts)
"""A session's events: the version is its last event's seq, so a stream that sent up to seq N waits for > N."""


@dataclass(eq=False)
class Waiter:
    topic: Topic
    key: str
    seen: int
    wake: Callable[[], object] = field(repr=False)


class Changes:
    """The process's poller (one per app: `app.extensions["hitl-changes"]`); its thread runs only while a stream
    waits, so an idle process reads nothing."""

    def __init__(self, db: Database, interval: float = POLL_SECONDS) -> None:
        self.db = db
        self.interval = interval
        self._lock = threading.Lock()
        self._waiters: set[Waiter] = set()
        self._polling = False

    def wait(self, topic: Topic, key: str, seen: int, timeout: float) -> None:
        """Block until `key`'s version passes `seen`, or `timeout` seconds."""
        changed = threading.Event()
        waiter = self._add(Waiter(topic, key, seen, changed.set))
        try:
            changed.wait(timeout)
        finally:
            self._remove(waiter)

    async def changed(self, topic: Topic, key: str, seen: int, timeout: float) -> None:
        """`wait` for a coroutine: the event loop goes on serving everything else meanwhile."""
        loop = asyncio.get_running_loop()
        changed = asyncio.Event()
        waiter = self._add(Waiter(topic, key, seen, lambda: loop.call_soon_threadsafe(changed.set)))
        try:
            await asyncio.wait_for(changed.wait(), timeout)
        except TimeoutError:
            pass
        finally:
            self._remove(waiter)

    def _add(self, waiter: Waiter) -> Waiter:
        with self._lock:
            self._waiters.add(waiter)
            if not self._polling:
                self._polling = True
                threading.Thread(target=self._poll, name="hitl-changes", daemon=True).start()
        return waiter

    def _remove(self, waiter: Waiter) -> None:
        with self._lock:
            self._waiters.discard(waiter)

    def _poll(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                waiting = list(self._waiters)
                if not waiting:
                    self._polling = False
                    return
            for waiter in self._moved(waiting):
                self._remove(waiter)
                waiter.wake()

    def _moved(self, waiting: list[Waiter]) -> list[Waiter]:
        """The waiters whose key's version passed what they have; all of them when the database cannot say (each
        stream then reads it itself, and ends if it cannot either)."""
        keys: dict[Topic, set[str]] = {}
        for waiter in waiting:
            keys.setdefault(waiter.topic, set()).add(waiter.key)
        versions: dict[tuple[Topic, str], int] = {}
        try:
            with self.db.read() as db:
                for topic, wanted in keys.items():
                    chunks = iter(wanted)
                    while chunk := list(islice(chunks, KEYS_PER_QUERY)):
                        versions.update(((topic, key), version) for key, version in topic.versions(db, chunk).items())
        except SQLAlchemyError:
            log.warning("could not read what the open event streams wait on; they read it themselves", exc_info=True)
            return waiting
        return [w for w in waiting if versions.get((w.topic, w.key), w.seen + 1) > w.seen]
