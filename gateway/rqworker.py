"""The RQ worker classes `hitl worker` runs: RQ's own, with a shutdown that does not wait out a minute.

RQ listens for commands on a pubsub channel, in a thread that waits up to 60 s for each message. On a warm
shutdown RQ unsubscribes, then stops that thread and waits for it (redis-py's `stop()` joins it). When the
thread reads the UNSUBSCRIBE reply before it is told to stop, it goes back to waiting, and the shutdown
waits with it, up to the full minute: longer than a platform's grace period (Heroku sends SIGKILL after
30 s). Telling the thread to stop before unsubscribing lets the reply end its wait.
"""

from __future__ import annotations

from rq import SimpleWorker, Worker
from rq.worker import BaseWorker


class _PromptUnsubscribe(BaseWorker):
    def unsubscribe(self) -> None:
        if self.pubsub_thread is not None:
            self.pubsub_thread.stop(timeout=0)  # the flag only, no wait: the UNSUBSCRIBE reply ends the wait
        super().unsubscribe()


class HitlWorker(_PromptUnsubscribe, Worker):
    """RQ's forking worker: each job in a work horse of its own."""


class HitlSimpleWorker(_PromptUnsubscribe, SimpleWorker):
    """RQ's worker that runs each job in the worker process itself."""


WORKER_CLASSES: dict[str, type[BaseWorker]] = {"fork": HitlWorker, "simple": HitlSimpleWorker}
"""HITL_WORKER_CLASS -> the class."""
