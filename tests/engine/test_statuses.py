"""The statuses the code writes are the ones the protocol page lists, and they are stored as plain strings."""

from __future__ import annotations

import re
from enum import StrEnum
from pathlib import Path

import pytest

from engine.store.statuses import (
    CallStatus,
    CandidateOutcome,
    Outcome,
    RequestStatus,
    RunStatus,
    SessionStatus,
    TurnStatus,
)

PROTOCOL = Path(__file__).resolve().parents[2] / "docs" / "protocol.md"
DOCUMENTED: dict[str, tuple[type[StrEnum], ...]] = {
    "Session": (SessionStatus,), "Turn": (TurnStatus,), "Run": (RunStatus,), "InputRequest": (RequestStatus, Outcome),
    "ToolCall": (CallStatus,), "ResponseCandidate": (CandidateOutcome,),
}


def documented_statuses(entity: str) -> set[str]:
    """The words in code spans of the entity's bullet under "## Statuses" (`ctx.ask` and the like left out)."""
    section = PROTOCOL.read_text().split("## Statuses", 1)[1].split("\n## ", 1)[0]
    bullet = re.search(rf"^\* \*\*{entity}\*\*:(.*?)(?=^\* |\Z)", section, re.MULTILINE | re.DOTALL)
    assert bullet is not None, f"no {entity} bullet under Statuses in {PROTOCOL.name}"
    spans = [span for span in re.findall(r"`([^`]+)`", bullet.group(1)) if not re.search(r"\w\.\w", span)]
    return {word for span in spans for word in re.findall(r"[a-z][a-z_-]*", span)}


@pytest.mark.parametrize("entity", sorted(DOCUMENTED))
def test_the_protocol_page_lists_every_status_the_code_writes(entity: str) -> None:
    written = {member.value for enum in DOCUMENTED[entity] for member in enum}

    assert documented_statuses(entity) == written


def test_a_status_is_its_stored_string() -> None:
    assert TurnStatus.WAITING == "waiting"
    assert f"{Outcome.APPROVED}" == "approved"
    assert {CandidateOutcome.TIMED_OUT: 1}["timed-out"] == 1  # hashes as the string: a dict of stored values finds it
