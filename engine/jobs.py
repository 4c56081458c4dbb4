"""Jobs: functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from . import delivery, inbound, recovery, runner
from .runtime import OutboxRow, Runtime, current

log = logging.getLogger(__name__)

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
    """Run the job of outbox row `outbox_id` (both executors come here), then the turns it followed up with.
    A follow-up that fails is handed to the queue, to be retried there as any job."""
    later = perform_one(rt, job, outbox_id, args)
    while later:
        row_id, name, row_args = later.pop(0)
        try:
            later.extend(perform_one(rt, name, row_id, row_args))
        except Exception:
            log.exception("%s, a follow-up of %s, failed; it goes to the queue", name, job)
            rt.push([(row_id, name, row_args)])


def perform_one(rt: Runtime, job: str, outbox_id: int, args: list[Any]) -> list[OutboxRow]:
    with rt.running_job(outbox_id), rt.following(job in FOLLOWED) as later:
        IMPLEMENTATIONS[job](rt, *args)
    return later


def run(job: str, outbox_id: int, *args: Any) -> None:
    """RQ's entry point: the worker's own runtime runs the job."""
    perform(current(), job, outbox_id, list(args))
