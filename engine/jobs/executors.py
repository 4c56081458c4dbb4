"""Executors: the same jobs run in-process (embedded default) or on RQ workers (REDIS_URL set); the CLI hands
its jobs over to either."""

from __future__ import annotations

import logging
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from sqlalchemy import update

from engine import defaults
from engine.jobs.outbox import ExecutorUnavailable, OutboxRow
from engine.jobs.perform import perform
from engine.jobs.runtime import Executor, Runtime
from engine.store.tables import Outbox

log = logging.getLogger(__name__)


class InlineExecutor:
    """A small thread pool inside the web process. `join()` waits until no job is left (tests, shutdown)."""

    def __init__(self, workers: int = defaults.INLINE_WORKERS) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hitl-job")
        self._pending = 0
        self._waiting: dict[str, datetime] = {}  # job id -> when it was pushed, until it starts
        self._idle = threading.Condition()

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        with self._idle:
            self._pending += 1
            self._waiting[job_id] = runtime.now()
        self._pool.submit(self._run, runtime, job, args, job_id, outbox_id)

    def waiting_since(self) -> datetime | None:
        with self._idle:
            return min(self._waiting.values(), default=None)

    def _run(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        with self._idle:
            self._waiting.pop(job_id, None)
        try:
            perform(runtime, job, outbox_id, args)
        except Exception:
            log.exception("job %s failed", job_id)
        finally:
            with self._idle:
                self._pending -= 1
                self._idle.notify_all()

    def join(self, timeout: float = 30.0) -> bool:
        """Wait until every submitted job (and every job those submitted) has finished."""
        with self._idle:
            return self._idle.wait_for(lambda: self._pending == 0, timeout)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True)


class RQExecutor:
    """Pushes jobs to an RQ queue; `hitl worker` runs them. Job ids use only [A-Za-z0-9_-]."""

    def __init__(self, redis_url: str, queue_name: str = defaults.QUEUE_NAME,
                 job_timeout: int = defaults.JOB_TIMEOUT_SECONDS) -> None:
        from redis import Redis
        from rq import Queue

        self.redis = Redis.from_url(redis_url, socket_connect_timeout=2, socket_timeout=5)
        self.queue = Queue(queue_name, connection=self.redis)
        self.job_timeout = job_timeout

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        """Enqueue by name; the worker's own runtime (engine.jobs.runtime.current()) runs it."""
        from redis.exceptions import RedisError
        from rq import Retry

        try:
            self.queue.enqueue_call(
                "engine.jobs.perform.run", args=(job, outbox_id, *args), job_id=job_id, timeout=self.job_timeout,
                result_ttl=defaults.JOB_RESULT_TTL_SECONDS, failure_ttl=defaults.JOB_FAILURE_TTL_SECONDS,
                retry=Retry(max=3, interval=[1, 5, 30]),
            )
        except RedisError as exc:
            raise ExecutorUnavailable(str(exc)) from exc

    def waiting_since(self) -> datetime | None:
        """The `enqueued_at` of the job at the head of the queue (RQ's queues are first in, first out)."""
        from redis.exceptions import RedisError

        try:
            head = self.queue.get_job_ids(0, 1)
            job = self.queue.fetch_job(head[0]) if head else None
        except RedisError:
            log.warning("could not read the head of the queue", exc_info=True)
            return None
        return job.enqueued_at if job is not None else None


class HandOver:
    """The executor of a process that runs no job itself (the CLI): a turn runs only in the deployment's own
    processes, with their agent and environment. A job goes to `queue` (RQ, with REDIS_URL) when there is one;
    otherwise, or when the queue cannot take it, its outbox row is marked due before any other
    (`defaults.HANDED_OVER_AT`), for the serving process's hand-over poll or, else, a worker's sweep."""

    def __init__(self, queue: Executor | None = None) -> None:
        self.queue = queue
        self.queued: list[OutboxRow] = []
        """Rows the queue took."""
        self.left: list[OutboxRow] = []
        """Rows left in the outbox, marked for the serving process."""
        self.queue_error: str | None = None
        """Why the queue refused a job, when it did."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        if self.queue is not None:
            try:
                self.queue.submit(runtime, job, args, job_id, outbox_id)
            except ExecutorUnavailable as exc:
                self.queue_error = str(exc)
            else:
                self.queued.append((outbox_id, job, args))
                return
        with runtime.db.write() as db:
            db.execute(update(Outbox).where(Outbox.id == outbox_id).values(available_at=defaults.HANDED_OVER_AT))
        self.left.append((outbox_id, job, args))

    def waiting_since(self) -> datetime | None:
        return None  # no job waits here
