"""End to end on PostgreSQL + Redis through a real `hitl worker` process, whose GitHub is a fake REST server on
a real port (`responses` cannot reach into another process): comments in, prompts and reactions out."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.github.support import ALICE, BOT, Github, github_stack
from tests.support.agent import read_ledger, script

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})


@pytest.fixture
def github(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Github]:
    with github_stack(request, "postgres", tmp_path) as built:
        yield built


def test_a_turn_parks_on_an_approval_and_a_question_and_comments_see_it_through(github: Github) -> None:
    opening = github.comment(ALICE, f"@{BOT} {script([REFUND], [QUESTION])}", issue=42)
    assert opening.response.status_code == 202 and opening.comment.reactions == ["eyes"]
    sid = github.session(42)
    [(approval, first)] = github.prompts(42)
    assert first.body.startswith("Approve refund?\n") and "Reply `/approve`" in first.body
    assert "charge_id=ch_1" in first.body and "amount=5" in first.body  # JSONB keeps its own key order

    approve = github.comment(ALICE, "/approve", issue=42)
    assert approve.comment.reactions == ["eyes", "+1"]
    assert "**Approved by alice.**" in first.body and "Reply" not in first.body
    assert [e["charge_id"] for e in read_ledger()] == ["ch_1"]
    (_, first), (question, second) = github.prompts(42)
    assert second.body.startswith("Which color?\n1. Red - warm\n2. Blue - cool\n")
    assert github.stack.turn(sid)["status"] == "waiting"

    answer = github.comment(ALICE, "/answer 2", issue=42)
    assert answer.comment.reactions == ["eyes", "+1"]
    assert "**Answered: Blue (by alice).**" in second.body
    turn = github.stack.turn(sid)
    assert turn["status"] == "completed" and '"answer": "Blue"' in turn["result"]
    assert [(r["requestId"], r["outcome"]) for r in turn["requests"]] == [
        (approval.request_id, "approved"), (question.request_id, "answered")]
    assert github.said(42)[-1].startswith("done | ")
    assert github.stack.event_types(sid)[-2:] == ["turn.completed", "session.waiting"]
    assert len(read_ledger()) == 1
