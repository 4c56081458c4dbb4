"""The transactional outbox: a job is a row written in the transaction that wants it, so no job is lost and
none runs for work that rolled back.

* A transaction records a job's row (`record`, through `Runtime.enqueue`); once it commits, its rows are
  pushed to the executor (`push`), except the `run_turn` rows committed inside `following()`, which the job
  that committed them runs itself (engine/jobs/perform.py).
* A delivery rides in the job whose transaction wants it (`RIDING_JOBS`): that job runs it itself when it ends,
  or while slow work (a tool, a model call: `riding`) goes on for a while, rather than through the queue.
* A job runs inside `running_job(row)`: the first transaction it commits deletes the row (`hand_off`), so a
  job that started is not pushed again; a job that commits none deletes it when it ends, unless it raised
  `TryLater` (what it needs cannot answer now): its row stays, and the sweep pushes it again.
* A row whose push was lost stays: the sweep pushes it again (`push_outbox`), the serving process takes the
  rows the CLI handed over (`take_handed_over`), and `owed` tells the sweep which work still has a job here.
"""

from __future__ import annotations

import logging
import secrets
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

from sqlalchemy import Table, bindparam, delete, insert, select, update
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.store.tables import Outbox
from engine.store.tx import OutboxRow, Tx

if TYPE_CHECKING:
    from engine.jobs.runtime import Runtime

log = logging.getLogger(__name__)


class ExecutorUnavailable(Exception):
    """The queue cannot take a job right now (Redis down): the outbox row stays for sweep()."""


class TryLater(Exception):
    """Raised by a job, before its first transaction, whose work cannot be done now (a platform that cannot
    answer): the job ends without failing and its outbox row stays, so sweep() pushes it again a while later
    (`push_outbox`), as it does a row whose push was lost."""


FOLLOW_UP_JOBS = frozenset({"run_turn"})
"""Jobs that a job which commits them runs itself when it ends (see `following`)."""
RIDING_JOBS = frozenset({"deliver"})
"""Jobs that any job which commits them runs itself (see `following`): a delivery costs no trip through the queue,
and reaches the channel as soon as the job's work allows."""

_job_row: ContextVar[int | None] = ContextVar("hitl_job_outbox_row", default=None)
"""The outbox row of the job this thread runs, until a transaction of the job deletes it."""
_following: ContextVar[Following | None] = ContextVar("hitl_following", default=None)
_OUTBOX = cast(Table, Outbox.__table__)
_DELETE_JOB_ROW = delete(_OUTBOX).where(_OUTBOX.c.id == bindparam("row"))
"""A job's hand-off, in its first transaction (on the table: no ORM work), built once (see turns/transitions.py)."""
_INSERT_JOB_ROW = insert(_OUTBOX).returning(_OUTBOX.c.id)
_HANDED_OVER = select(Outbox.id).where(Outbox.available_at <= defaults.HANDED_OVER_AT).limit(1)


def record(tx: Tx, job: str, args: list[Any], now: datetime) -> None:
    """Write a job's row in transaction `tx`; it is pushed once `tx` commits."""
    row_id = tx.db.connection().execute(
        _INSERT_JOB_ROW, {"job": job, "args": args, "created_at": now, "available_at": now}).scalar_one()
    tx.outbox.append((row_id, job, args))


def hand_off(tx: Tx) -> bool:
    """In the first transaction a job commits: delete the job's row (whether this is one: the result)."""
    job_row = _job_row.get()
    if job_row is None:
        return False
    tx.db.connection().execute(_DELETE_JOB_ROW, {"row": job_row})
    return True


def committed(tx: Tx, handed_off: bool) -> list[OutboxRow]:
    """After `tx` committed: the rows to push now (those `following()` collects left out)."""
    if handed_off:
        _job_row.set(None)
    current = _following.get()
    if current is None:
        return tx.outbox
    return [row for row in tx.outbox if not current.collects(row)]


@contextmanager
def running_job(rt: Runtime, outbox_id: int) -> Iterator[None]:
    """Run a job of outbox row `outbox_id` in this thread: the job's first committed transaction deletes
    the row, or, if it commits none, a transaction of its own when it ends (whether it succeeded or not:
    RQ retries a failed job; sweep() must not push it again), unless it raised TryLater first: the row stays
    for sweep()."""
    token = _job_row.set(outbox_id)
    try:
        yield
    except TryLater as exc:
        if _job_row.get() is None:  # handed off already: only a retry of the job can do it again
            raise
        log.warning("outbox row %s: %s; the sweep pushes it again", outbox_id, exc)
        _job_row.set(None)
    finally:
        if _job_row.get() is not None:
            with rt.transaction():
                pass
        _job_row.reset(token)


@dataclass
class Following:
    """What a job collects of the rows its transactions commit, for it to run itself (engine/jobs/perform.py):
    the deliveries (`RIDING_JOBS`) always, and the turns it resumes or starts (`FOLLOW_UP_JOBS`) when `turns`."""

    run: Callable[[list[OutboxRow]], None]
    """Runs rows in this job (`perform.perform_rows`)."""
    turns: bool
    rows: list[OutboxRow] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def collects(self, row: OutboxRow) -> bool:
        if row[1] in RIDING_JOBS or (self.turns and row[1] in FOLLOW_UP_JOBS):
            with self._lock:
                self.rows.append(row)
            return True
        return False

    def ride(self) -> None:
        """Run the deliveries collected so far."""
        with self._lock:
            rides = [row for row in self.rows if row[1] in RIDING_JOBS]
            self.rows[:] = [row for row in self.rows if row[1] not in RIDING_JOBS]
        if rides:
            self.run(rides)

    @contextmanager
    def riding(self) -> Iterator[None]:
        """Around slow work: the deliveries collected so far run once it has taken RIDE_AFTER_SECONDS, in a thread
        of their own while it goes on; work done sooner leaves them to be delivered with what comes after it."""
        with self._lock:
            waiting = any(row[1] in RIDING_JOBS for row in self.rows)
        if not waiting:
            yield
            return
        timer = threading.Timer(defaults.RIDE_AFTER_SECONDS, self.ride)
        timer.daemon = True
        timer.start()
        try:
            yield
        finally:
            timer.cancel()
            timer.join()  # a delivery under way ends before the job goes on


@contextmanager
def following(rt: Runtime, run: Callable[[list[OutboxRow]], None], turns: bool,
              carried: Sequence[OutboxRow] = ()) -> Iterator[list[OutboxRow]]:
    """Collect, instead of pushing, the deliveries the transactions inside commit and, with `turns`, the
    `run_turn` jobs: the job that applied an answer (or a message) then runs the turn itself, in the same
    worker, without a trip through the queue, and any job delivers its own events (`jobs.perform`), with the
    deliveries `carried` from the job before it. Their outbox rows stay until each starts, as for any job: if
    this process dies first, sweep() pushes them. If the block fails, what it collected is pushed as usual.
    `riding()` inside wraps slow work."""
    current = Following(run, turns, list(carried))
    token = _following.set(current)
    try:
        yield current.rows
    except BaseException:
        _following.reset(token)
        push(rt, current.rows)
        raise
    _following.reset(token)


def riding() -> AbstractContextManager[None]:
    """Around a job's slow work (a tool, a model call): the deliveries it collected so far run if that work takes
    a while (`Following.riding`), so what its turn said reaches the channel without waiting for the work, and
    work done at once costs no delivery of its own."""
    current = _following.get()
    return current.riding() if current is not None else nullcontext()


def push(rt: Runtime, rows: list[OutboxRow]) -> None:
    """Hand committed outbox rows to the executor; a row stays until its job starts, and sweep() pushes
    again the rows whose job has not started in a while (a lost push)."""
    for row_id, job, args in rows:
        try:
            # unique per push: RQ keeps job ids across a whole Redis, which several deployments may share
            rt.executor.submit(rt, job, args, job_id=f"{job}-{row_id}-{secrets.token_hex(4)}", outbox_id=row_id)
        except ExecutorUnavailable:
            log.warning("executor unavailable; outbox row %s waits for sweep()", row_id, exc_info=True)


def push_outbox(rt: Runtime) -> int:
    """Push again the outbox rows whose job has not started a while after its push, and give them that while
    again. A row pushed after the oldest job still waiting in the queue is not pushed again: its job waits
    behind that one (a queue that far behind is not fed duplicates, which would put it further behind);
    once the queue has moved past it, a row still here was lost."""
    cutoff = rt.now() - timedelta(seconds=defaults.SWEEP_OUTBOX_AFTER_SECONDS)
    waiting_since = rt.executor.waiting_since()
    if waiting_since is not None:
        cutoff = min(cutoff, waiting_since)
    return push_due(rt, cutoff)


def push_due(rt: Runtime, cutoff: datetime) -> int:
    """Push the outbox rows due by `cutoff` (at most 500), each by one process however many look: a row taken is
    due again a while later (its job, once started, deletes it)."""
    now = rt.now()
    with rt.transaction() as db:
        rows = [
            (row.id, row.job, list(row.args))
            for row in db.execute(
                select(Outbox).where(Outbox.available_at <= cutoff)
                .order_by(Outbox.id).limit(500).with_for_update(skip_locked=True)
            ).scalars()
        ]
        if rows:
            db.execute(update(Outbox).where(Outbox.id.in_([r[0] for r in rows])).values(available_at=now))
    if rows:
        push(rt, rows)
    return len(rows)


def take_handed_over(rt: Runtime) -> int:
    """Run the jobs the CLI handed over (`executors.HandOver`): the serving process's poll. Finding none, the
    usual case, is one read on the outbox's `available_at` index."""
    with rt.db.read() as db:
        if db.execute(_HANDED_OVER).first() is None:
            return 0
    return push_due(rt, defaults.HANDED_OVER_AT)


def owed(db: DbSession, job: str, firsts: Sequence[Any]) -> set[Any]:
    """Which of `firsts` have a `job` in the outbox (by its first argument): jobs pushed and not yet started,
    whose lost pushes push_outbox() recovers."""
    if not firsts:
        return set()
    wanted = set(firsts)
    args = db.execute(select(Outbox.args).where(Outbox.job == job)).scalars()
    return {a[0] for a in args if a and a[0] in wanted}
