"""Jobs: functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from engine.answers import places
from engine.channels import delivery, groups, inbound
from engine.jobs import callbacks, recovery
from engine.jobs.outbox import OutboxRow
from engine.jobs.runtime import Runtime, current
from engine.turns import runner

log = logging.getLogger(__name__)

IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "run_turn": runner.run_turn,
    "deliver": delivery.deliver,
    "process_inbound": inbound.process_inbound,
    "sweep": recovery.sweep,
    "send_callback": callbacks.send_callback,
    "show_direct": places.show_direct,
    "look_up_approvers": groups.look_up_approvers,
}
"""Job name -> body taking the runtime first."""


FOLLOWED = frozenset({"process_inbound"})
"""Jobs that run a turn they resume or start themselves (`Runtime.following`): an answer's turn resumes in
the worker that applied the answer, without a trip through the queue. One turn per job, so that turn has
the whole job timeout to itself; any other goes to the queue, to be shared among the workers."""


def perform(rt: Runtime, job: str, outbox_id: int, args: list[Any]) -> None:
    """Run the job of outbox row `outbox_id` (both executors come here), then the turn it followed up with.
    A follow-up that fails is handed to the queue, to be retried there as any job."""
    later = perform_one(rt, job, outbox_id, args)
    if not later:
        return
    (row_id, name, row_args), rest = later[0], later[1:]
    rt.push(rest)
    try:
        perform_one(rt, name, row_id, row_args)
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
