"""The RQ worker classes `hitl worker` runs: RQ's own, with a shutdown that does not wait out a minute, and a
fork worker whose job survives the SIGTERM a platform sends every process.

RQ listens for commands on a pubsub channel, in a thread that waits up to 60 s for each message. On a warm
shutdown RQ unsubscribes, then stops that thread and waits for it (redis-py's `stop()` joins it). When the
thread reads the UNSUBSCRIBE reply before it is told to stop, it goes back to waiting, and the shutdown
waits with it, up to the full minute: longer than a platform's grace period (Heroku sends SIGKILL after
30 s). Telling the thread to stop before unsubscribing lets the reply end its wait.
"""

from __future__ import annotations

import signal

from rq import SimpleWorker, Worker
from rq.worker import BaseWorker


class _PromptUnsubscribe(BaseWorker):
    def unsubscribe(self) -> None:
        if self.pubsub_thread is not None:
            self.pubsub_thread.stop(timeout=0)  # the flag only, no wait: the UNSUBSCRIBE reply ends the wait
        super().unsubscribe()


class HitlWorker(_PromptUnsubscribe, Worker):
    """RQ's forking worker: each job in a work horse of its own.

    RQ's work horse dies at a SIGTERM. A platform stopping the worker sends one to each of its processes
    (Heroku to every process of the dyno, systemd to the whole cgroup), so the job was killed mid-tool while
    the worker itself waited to let it finish. The horse ignores SIGTERM: the worker's warm shutdown lets the
    job end; a cold one (a second signal, a job timeout) still kills the horse with SIGKILL.
    """

    def setup_work_horse_signals(self) -> None:
        super().setup_work_horse_signals()
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


class HitlSimpleWorker(_PromptUnsubscribe, SimpleWorker):
    """RQ's worker that runs each job in the worker process itself."""


WORKER_CLASSES: dict[str, type[BaseWorker]] = {"fork": HitlWorker, "simple": HitlSimpleWorker}
"""HITL_WORKER_CLASS -> the class."""
