"""The runtime: database, agent, executor and clock, and the write transaction that joins them to the outbox."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy import update
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.agent import Agent
from engine.channels.contract import SHOWN_EVENTS, ChannelAdapter
from engine.channels.groups import PlatformGroups
from engine.jobs import outbox
from engine.jobs.outbox import OutboxRow
from engine.store.db import Database
from engine.store.events import write_appended
from engine.store.tables import Session, utcnow
from engine.store.tx import Tx


class Executor(Protocol):
    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        """Run `job(*args)` later; the job must run inside `running_job(outbox_id)`."""

    def waiting_since(self) -> datetime | None:
        """When the oldest job still waiting in the queue was pushed; None when none waits, or when the
        executor cannot tell. Jobs start in the order they were pushed, so a job pushed before that time
        and not started was lost."""


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
        self.groups = PlatformGroups(self.channels, db, self.now)
        """The members of platform groups (Slack user groups, GitHub teams), through the channels, stored a while."""

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
        """A write transaction, its state a `Tx` (engine/store/tx.py). Before it commits: a deliver job for each
        channel session it wrote events to, the job's hand-off (the first transaction a job commits deletes the
        job's outbox row), then its messages, events and counters. Once it commits, the jobs it recorded with
        `enqueue()` are pushed to the executor (engine/jobs/outbox.py)."""
        with self.db.write() as db:
            tx = Tx.begin(db)
            yield db
            self._deliver_events(tx)
            handed_off = outbox.hand_off(tx)
            write_appended(tx)
        rows = outbox.committed(tx, handed_off)
        if rows:
            self.push(rows)

    def running_job(self, outbox_id: int) -> AbstractContextManager[None]:
        """Run the job of outbox row `outbox_id` in this thread (`outbox.running_job`)."""
        return outbox.running_job(self, outbox_id)

    def following(self, run: Callable[[list[OutboxRow]], None] | None = None, turns: bool = True,
                  carried: Sequence[OutboxRow] = ()) -> AbstractContextManager[list[OutboxRow]]:
        """Collect the deliveries and (with `turns`) the `run_turn` jobs the transactions inside commit, for this
        job to run with `run` (`outbox.following`; without `run`, deliveries are pushed when they ride)."""
        return outbox.following(self, run or self.push, turns, carried)

    def riding(self) -> AbstractContextManager[None]:
        """Around slow work: this job's deliveries run if it takes a while (`outbox.riding`)."""
        return outbox.riding()

    def _deliver_events(self, tx: Tx) -> None:
        """Sessions bound to a channel adapter get a deliver job for the events this transaction wrote that a
        channel shows (SHOWN_EVENTS), unless one is already queued and has not started (it will read these events
        too)."""
        if not self.channels:
            return
        touched = dict.fromkeys(  # (in the order they were written)
            event["session_id"] for event in tx.events if event["type"] in SHOWN_EVENTS)
        # at most one queued delivery per session: the job clears the flag before it reads the events
        flagged, unheld = [], []
        for session_id in touched:
            row = tx.held.get(session_id)  # locked and loaded here: its flag is read and set in memory
            if row is None:
                unheld.append(session_id)
            elif row.channel in self.channels and not row.delivery_queued:
                row.delivery_queued = True  # (written by the commit's flush, with the session's counters)
                flagged.append(session_id)
        if unheld:
            flagged += tx.db.execute(
                update(Session).where(Session.id.in_(unheld), Session.channel.in_(list(self.channels)),
                                      Session.delivery_queued.is_(False))
                .values(delivery_queued=True).returning(Session.id)
            ).scalars().all()
        for session_id in flagged:
            outbox.record(tx, "deliver", [session_id], self.now())

    def enqueue(self, db: DbSession, job: str, *args: Any) -> None:
        """Record a job in the outbox, in the caller's transaction (`outbox.record`)."""
        outbox.record(Tx.of(db), job, list(args), self.now())

    def push(self, rows: list[OutboxRow]) -> None:
        """Hand committed outbox rows to the executor (`outbox.push`)."""
        outbox.push(self, rows)


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
