"""Jobs: functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import delivery, inbound, recovery, runner
from .runtime import Runtime, current

IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "run_turn": runner.run_turn,
    "deliver": delivery.deliver,
    "process_inbound": inbound.process_inbound,
    "sweep": recovery.sweep,
}
"""Job name -> body taking the runtime first."""


FOLLOWED = frozenset({"process_inbound", "run_turn"})
"""Jobs that run the turns they resume or start themselves (`Runtime.following`): an answer's turn resumes
in the worker that applied the answer, and a session's next queued turn in the worker that ended the one
before. A sweep pushes what it recovers to the queue, to be shared among the workers."""


def perform(rt: Runtime, job: str, outbox_id: int, args: list[Any]) -> None:
    """Run the job of outbox row `outbox_id` (both executors come here), then the turns it followed up with."""
    todo = [(outbox_id, job, args)]
    while todo:
        row_id, name, row_args = todo.pop(0)
        with rt.running_job(row_id), rt.following(name in FOLLOWED) as later:
            IMPLEMENTATIONS[name](rt, *row_args)
        todo.extend(later)


def run(job: str, outbox_id: int, *args: Any) -> None:
    """RQ's entry point: the worker's own runtime runs the job."""
    perform(current(), job, outbox_id, list(args))
