"""Jobs: top-level functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import delivery, inbound, recovery, runner
from .runtime import current


def run_turn(turn_id: str) -> None:
    runner.run_turn(current(), turn_id)


def deliver(session_id: str) -> None:
    delivery.deliver(current(), session_id)


def process_inbound(inbound_id: int) -> None:
    inbound.process_inbound(current(), inbound_id)


def sweep() -> None:
    recovery.sweep(current())


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "run_turn": runner.run_turn,
    "deliver": delivery.deliver,
    "process_inbound": inbound.process_inbound,
    "sweep": recovery.sweep,
}
"""Job name -> body taking the runtime first; the in-process executor calls these directly."""
