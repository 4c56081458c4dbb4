"""Jobs: top-level functions taking ids only, each safe to run twice (RQ delivers at least once)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import recovery, runner
from .runtime import current


def run_turn(turn_id: str) -> None:
    runner.run_turn(current(), turn_id)


def sweep() -> None:
    recovery.sweep(current())


IMPLEMENTATIONS: dict[str, Callable[..., Any]] = {
    "run_turn": runner.run_turn,
    "sweep": recovery.sweep,
}
"""Job name -> body taking the runtime first; the in-process executor calls these directly."""
