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


def perform(rt: Runtime, job: str, outbox_id: int, args: list[Any]) -> None:
    """Run the job of outbox row `outbox_id` (both executors come here)."""
    with rt.running_job(outbox_id):
        IMPLEMENTATIONS[job](rt, *args)


def run(job: str, outbox_id: int, *args: Any) -> None:
    """RQ's entry point: the worker's own runtime runs the job."""
    perform(current(), job, outbox_id, list(args))
