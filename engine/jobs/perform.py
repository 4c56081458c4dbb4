"""Jobs: functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from engine.answers import places
from engine.channels import delivery, groups, inbound
from engine.jobs import callbacks, recovery
from engine.jobs.outbox import FOLLOW_UP_JOBS, OutboxRow
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
    """Run the job of outbox row `outbox_id` (both executors come here), then the rows it collected: the turn it
    followed up with, carrying the job's deliveries (an answer's card is updated with what its turn says, or while
    the turn's tool runs, if that takes a while), else the deliveries alone."""
    later = perform_one(rt, job, outbox_id, args)
    turns = [row for row in later if row[1] in FOLLOW_UP_JOBS]
    rides = [row for row in later if row[1] not in FOLLOW_UP_JOBS]
    if turns:
        rt.push(turns[1:])
        perform_row(rt, turns[0], rides)
    else:
        perform_rows(rt, rides)


def perform_rows(rt: Runtime, rows: list[OutboxRow]) -> None:
    """Run committed outbox rows in this job (`perform_row`)."""
    for row in rows:
        perform_row(rt, row)


def perform_row(rt: Runtime, row: OutboxRow, carried: Sequence[OutboxRow] = ()) -> None:
    """Run a committed outbox row in this job, with the deliveries `carried` to it, then its own deliveries. One
    that fails is handed to the queue, to be retried there as any job (what it collected goes there too)."""
    row_id, name, row_args = row
    try:
        later = perform_one(rt, name, row_id, row_args, carried)
    except Exception:
        log.exception("%s (outbox row %s), run by the job that wanted it, failed; it goes to the queue", name, row_id)
        rt.push([row])
        return
    perform_rows(rt, later)


def perform_one(rt: Runtime, job: str, outbox_id: int, args: list[Any],
                carried: Sequence[OutboxRow] = ()) -> list[OutboxRow]:
    with rt.running_job(outbox_id), rt.following(partial(perform_rows, rt), job in FOLLOWED, carried) as later:
        IMPLEMENTATIONS[job](rt, *args)
    return later


def run(job: str, outbox_id: int, *args: Any) -> None:
    """RQ's entry point: the worker's own runtime runs the job."""
    perform(current(), job, outbox_id, list(args))
