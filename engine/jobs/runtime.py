"""The runtime: database, agent, executor and clock, plus the transactional outbox that joins them."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timedelta
from typing import Any, Protocol, cast

from sqlalchemy import Table, bindparam, delete, insert, update
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.agent import Agent
from engine.channels.contract import ChannelAdapter
from engine.store.db import Database
from engine.store.events import held
from engine.store.tables import Outbox, Session, utcnow

log = logging.getLogger(__name__)


class ExecutorUnavailable(Exception):
    """The queue cannot take a job right now (Redis down): the outbox row stays for sweep()."""


class Executor(Protocol):
    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        """Run `job(*args)` later; the job must run inside `running_job(outbox_id)`."""

    def waiting_since(self) -> datetime | None:
        """When the oldest job still waiting in the queue was pushed; None when none waits, or when the
        executor cannot tell. Jobs start in the order they were pushed, so a job pushed before that time
        and not started was lost."""


_job_row: ContextVar[int | None] = ContextVar("hitl_job_outbox_row", default=None)
"""The outbox row of the job this thread runs, until a transaction of the job deletes it."""

OutboxRow = tuple[int, str, list[Any]]
"""A committed outbox row: its id, its job and the job's arguments."""

FOLLOW_UP_JOBS = frozenset({"run_turn"})
"""Jobs that a job which commits them runs itself when it ends (see `Runtime.following`)."""

_follow_ups: ContextVar[list[OutboxRow] | None] = ContextVar("hitl_follow_ups", default=None)
_OUTBOX = cast(Table, Outbox.__table__)
_DELETE_JOB_ROW = delete(_OUTBOX).where(_OUTBOX.c.id == bindparam("row"))
"""A job's hand-off, in its first transaction (on the table: no ORM work), built once (see turns/transitions.py)."""
_INSERT_JOB_ROW = insert(_OUTBOX).returning(_OUTBOX.c.id)


class Runtime:
    """Everything a job needs, built once per process by the gateway (web) or the worker."""

    def __init__(
        self,
        db: Database,
        agent: Agent,
        executor: Executor,
        *,
        lease_seconds: int = defaults.LEASE_SECONDS,
        response_policy_timeout: float = defaults.RESPONSE_POLICY_TIMEOUT_SECONDS,
        request_policy_timeout: float = defaults.REQUEST_POLICY_TIMEOUT_SECONDS,
        retention_days: int = defaults.RETENTION_DAYS,
        clock: Callable[[], datetime] = utcnow,
        channels: dict[str, ChannelAdapter] | None = None,
        callback_key: bytes | None = None,
        callback_hosts: frozenset[str] = frozenset(),
        agent_spec: str | None = None,
    ) -> None:
        self.db = db
        self.callback_key = callback_key
        """HITL_CALLBACK_SECRET's key: external requests' callbacks are signed with it (none: they take none)."""
        self.callback_hosts = callback_hosts
        """HITL_CALLBACK_ALLOWED_HOSTS: the only hosts callbacks may go to, when any are named."""
        self.channels = dict(channels or {})
        self.agent = agent
        self.agent_spec = agent_spec or agent.name
        """What a session opened here records as its agent: where the agent comes from (HITL_AGENT's
        `package.module:attribute`), else its name."""
        self.executor = executor
        self.lease_seconds = lease_seconds
        self.response_policy_timeout = response_policy_timeout
        self.request_policy_timeout = request_policy_timeout
        self.retention_days = retention_days
        self.clock = clock

    def now(self) -> datetime:
        return self.clock()

    def runs(self, agent: str) -> bool:
        """Whether a session that records `agent` runs with this runtime's agent (sessions opened before sessions
        recorded where their agent comes from record its name)."""
        return agent in (self.agent_spec, self.agent.name)

    def lease_until(self) -> datetime:
        return self.now() + timedelta(seconds=self.lease_seconds)

    @contextmanager
    def transaction(self) -> Iterator[DbSession]:
        """A write transaction; jobs added with `enqueue()` are pushed to the executor after it commits. The
        first transaction a job commits also deletes the job's outbox row: the hand-off is done."""
        job_row = _job_row.get()
        with self.db.write() as db:
            yield db
            self._deliver_events(db)
            if job_row is not None:
                db.connection().execute(_DELETE_JOB_ROW, {"row": job_row})
            rows: list[OutboxRow] = db.info.pop("outbox", [])
        if job_row is not None:
            _job_row.set(None)
        later = _follow_ups.get()
        if later is not None:
            later.extend(row for row in rows if row[1] in FOLLOW_UP_JOBS)
            rows = [row for row in rows if row[1] not in FOLLOW_UP_JOBS]
        if rows:
            self.push(rows)

    @contextmanager
    def running_job(self, outbox_id: int) -> Iterator[None]:
        """Run a job of outbox row `outbox_id` in this thread: the job's first committed transaction deletes
        the row, or, if it commits none, a transaction of its own when it ends (whether it succeeded or not:
        RQ retries a failed job; sweep() must not push it again)."""
        token = _job_row.set(outbox_id)
        try:
            yield
        finally:
            if _job_row.get() is not None:
                with self.transaction():
                    pass
            _job_row.reset(token)

    @contextmanager
    def following(self, collect: bool = True) -> Iterator[list[OutboxRow]]:
        """Collect, instead of pushing, the `run_turn` jobs the transactions inside commit: the job that
        applied an answer (or a message) then runs the turn itself, in the same worker, without a trip
        through the queue (`jobs.perform`). Their outbox rows stay until each starts, as for any job: if
        this process dies first, sweep() pushes them. If the block fails, what it collected is pushed as
        usual. With `collect` False, nothing is collected (the jobs are pushed)."""
        later: list[OutboxRow] = []
        if not collect:
            yield later
            return
        token = _follow_ups.set(later)
        try:
            yield later
        except BaseException:
            _follow_ups.reset(token)
            self.push(later)
            raise
        _follow_ups.reset(token)

    def _deliver_events(self, db: DbSession) -> None:
        """Sessions bound to a channel adapter get a deliver job for the events this transaction wrote, unless
        one is already queued and has not started (it will read these events too)."""
        touched = db.info.pop("event_sessions", set())
        if not touched or not self.channels:
            return
        # at most one queued delivery per session: the job clears the flag before it reads the events
        flagged, unheld = [], []
        for session_id in touched:
            row = held(db, session_id)  # locked and loaded here: its flag is read and set in memory
            if row is None:
                unheld.append(session_id)
            elif row.channel in self.channels and not row.delivery_queued:
                row.delivery_queued = True  # (written by the commit's flush, with the session's counters)
                flagged.append(session_id)
        if unheld:
            flagged += db.execute(
                update(Session).where(Session.id.in_(unheld), Session.channel.in_(list(self.channels)),
                                      Session.delivery_queued.is_(False))
                .values(delivery_queued=True).returning(Session.id)
            ).scalars().all()
        for session_id in flagged:
            self.enqueue(db, "deliver", session_id)

    def enqueue(self, db: DbSession, job: str, *args: Any) -> None:
        """Record a job in the outbox, in the caller's transaction."""
        now = self.now()
        row_id = db.connection().execute(
            _INSERT_JOB_ROW, {"job": job, "args": list(args), "created_at": now, "available_at": now}).scalar_one()
        db.info.setdefault("outbox", []).append((row_id, job, list(args)))

    def push(self, rows: list[OutboxRow]) -> None:
        """Hand committed outbox rows to the executor; a row stays until its job starts, and sweep() pushes
        again the rows whose job has not started in a while (a lost push)."""
        for row_id, job, args in rows:
            try:
                # unique per push: RQ keeps job ids across a whole Redis, which several deployments may share
                self.executor.submit(self, job, args, job_id=f"{job}-{row_id}-{secrets.token_hex(4)}",
                                     outbox_id=row_id)
            except ExecutorUnavailable:
                log.warning("executor unavailable; outbox row %s waits for sweep()", row_id, exc_info=True)


_current: Runtime | None = None


def install(runtime: Runtime) -> Runtime:
    """Make `runtime` the one jobs of this process use."""
    global _current
    _current = runtime
    return runtime


def current() -> Runtime:
    if _current is None:
        raise RuntimeError("no runtime installed in this process (the worker and create_app() install one)")
    return _current
