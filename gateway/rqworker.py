"""The RQ worker classes `hitl worker` runs: RQ's own, with a shutdown that does not wait out a minute, a
scheduler process that ends with its worker, and a fork worker whose job survives the SIGTERM a platform sends
every process.

RQ listens for commands on a pubsub channel, in a thread that waits up to 60 s for each message. On a warm
shutdown RQ unsubscribes, then stops that thread and waits for it (redis-py's `stop()` joins it). When the
thread reads the UNSUBSCRIBE reply before it is told to stop, it goes back to waiting, and the shutdown
waits with it, up to the full minute: longer than a platform's grace period (Heroku sends SIGKILL after
30 s). Telling the thread to stop before unsubscribing lets the reply end its wait.
"""

from __future__ import annotations

import os
import signal
import time
from multiprocessing.process import BaseProcess

from redis.client import Pipeline
from rq import SimpleWorker, Worker
from rq.defaults import DEFAULT_LOGGING_DATE_FORMAT, DEFAULT_LOGGING_FORMAT
from rq.scheduler import RQScheduler
from rq.worker import BaseWorker


class BoundScheduler(RQScheduler):
    """RQ's scheduler, whose process ends when the worker that forked it is gone.

    RQ forks the scheduler (which enqueues the retries of failed jobs when their delay is over) and stops it
    when the worker stops. A worker killed outright (SIGKILL, the OOM killer) never stops it: it went on
    running, holding the queue's scheduler lock, so no other worker's scheduler could ever take the queue.
    Its loop now checks, every second, that its parent is still the worker; when not, it stops as at a
    SIGTERM: it releases its lock and exits.
    """

    worker_pid = 0

    def start(self) -> BaseProcess:
        self.worker_pid = os.getpid()  # the fork's child keeps it: its parent, until that dies
        return super().start()

    def heartbeat(self) -> None:
        if os.getppid() != self.worker_pid:
            self.log.warning("Scheduler: its worker (pid %s) is gone; stopping", self.worker_pid)
            self.request_stop()
        super().heartbeat()


HEARTBEAT_SLACK_SECONDS = 10.0
"""How much of its time to live a worker's registration may have lost before a heartbeat renews it."""


class _HitlWorker(BaseWorker):
    """What both classes change in RQ's worker: a quick warm shutdown, a bound scheduler, and no heartbeat or
    state sent again that Redis has already.

    Around every job RQ sends the worker's heartbeat (three commands, each a round trip) after the job, before it
    waits for the next and after it got one, and its `idle` state twice: seven round trips of about twenty a job
    took, for a registration that lives 8 minutes. A heartbeat that would not move its expiry by more than
    HEARTBEAT_SLACK_SECONDS, and a state Redis holds already, are not sent; one sent in a pipeline always is
    (RQ's own, with the job's start and its monitoring)."""

    _alive_until = 0.0
    """When the worker's registration expires (time.monotonic()), as its last heartbeat set it."""

    def heartbeat(self, timeout: int | None = None, pipeline: Pipeline | None = None) -> None:
        ttl = timeout or self.worker_ttl + 60  # RQ's default
        now = time.monotonic()
        if pipeline is None and self._alive_until - now > ttl - HEARTBEAT_SLACK_SECONDS:
            return
        super().heartbeat(timeout, pipeline)
        self._alive_until = now + ttl

    def set_state(self, state: str, pipeline: Pipeline | None = None) -> None:
        if pipeline is None and state == self.get_state():
            return
        super().set_state(state, pipeline)

    def unsubscribe(self) -> None:
        if self.pubsub_thread is not None:
            self.pubsub_thread.stop(timeout=0)  # the flag only, no wait: the UNSUBSCRIBE reply ends the wait
        super().unsubscribe()

    def _start_scheduler(self, burst: bool = False, logging_level: str | None = "INFO",
                         date_format: str = DEFAULT_LOGGING_DATE_FORMAT,
                         log_format: str = DEFAULT_LOGGING_FORMAT) -> None:
        """RQ's, with a BoundScheduler (a burst enqueues due jobs and starts no process: RQ's own does)."""
        if burst:
            super()._start_scheduler(burst, logging_level, date_format, log_format)
            return
        self.scheduler = BoundScheduler(
            self.queues, connection=self.connection, serializer=self.serializer, date_format=date_format,
            log_format=log_format, logging_level=logging_level if logging_level is not None else self.log.level,
        )
        self.scheduler.acquire_locks(auto_start=True)  # started when it holds a queue's lock, as RQ's is


class HitlWorker(_HitlWorker, Worker):
    """RQ's forking worker: each job in a work horse of its own.

    RQ's work horse dies at a SIGTERM. A platform stopping the worker sends one to each of its processes
    (Heroku to every process of the dyno, systemd to the whole cgroup), so the job was killed mid-tool while
    the worker itself waited to let it finish. The horse ignores SIGTERM: the worker's warm shutdown lets the
    job end; a cold one (a second signal, a job timeout) still kills the horse with SIGKILL.
    """

    def setup_work_horse_signals(self) -> None:
        super().setup_work_horse_signals()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class HitlSimpleWorker(_HitlWorker, SimpleWorker):
    """RQ's worker that runs each job in the worker process itself."""


WORKER_CLASSES: dict[str, type[BaseWorker]] = {"fork": HitlWorker, "simple": HitlSimpleWorker}
"""HITL_WORKER_CLASS -> the class."""
