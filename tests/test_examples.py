"""Every agent in examples/ through a real turn on the embedded stack (SQLite, in-process jobs): it parks on its
approval, people answer, and it resumes to its end, so no example rots. An example on a real model gets a
ScriptedModel swapped in."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import examples.openai_compatible
from engine import OpenAIChatModel, ScriptedModel
from gateway.demo import script
from gateway.settings import Settings
from tests.conftest import API_KEYS, Stack
from tests.github.conftest import github_in_process
from tests.github.support import ALICE, BOT, DAVE


@contextmanager
def example(tmp_path: Path, agent: str) -> Iterator[Stack]:
    """A SQLite stack serving the example `agent` (`examples.x:agent`), alice, bob and carol holding API keys."""
    stack = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", agent=agent,
                                     api_keys=API_KEYS, sweep_seconds=3600))
    try:
        yield stack
    finally:
        stack.close()


def refund_through_approval(stack: Stack) -> None:
    """The billing tools' walk: alice asks for a refund, the turn parks on it, she approves, it is refunded."""
    sid, _ = stack.start("refund $20 on ch_1001", who="alice")
    [approval] = stack.pending(sid)
    assert approval["action"]["toolName"] == "refund_charge"
    assert approval["action"]["input"] == {"charge_id": "ch_1001", "amount": 20.0}
    assert stack.turn(sid)["status"] == "waiting"

    assert stack.answer(approval["requestId"], "approve", who="alice").status == "settled"
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert turn["result"].startswith("Refunded 20.00 on ch_1001 (approved by alice")


def test_the_billing_demo_refunds_once_approved(tmp_path: Path) -> None:
    with example(tmp_path, "examples.billing:agent") as stack:
        refund_through_approval(stack)


def test_the_openai_compatible_agent_refunds_once_approved(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = examples.openai_compatible.agent
    assert isinstance(agent.model, OpenAIChatModel)  # the example as shipped talks to an endpoint
    monkeypatch.setattr(agent, "model", ScriptedModel(script))  # offline: the demo's script plays the model
    with example(tmp_path, "examples.openai_compatible:agent") as stack:
        refund_through_approval(stack)


def test_a_payout_runs_once_two_different_people_approved(tmp_path: Path) -> None:
    with example(tmp_path, "examples.two_person:agent") as stack:
        two_people_approve(stack)


def two_people_approve(stack: Stack) -> None:
    sid, _ = stack.start("pay $250 to acct_42", who="alice")
    [approval] = stack.pending(sid)
    assert approval["action"]["input"] == {"account": "acct_42", "amount": 250.0}

    assert stack.answer(approval["requestId"], "approve", who="alice").status == "pending"
    assert stack.answer(approval["requestId"], "approve", who="alice").status == "pending"  # still one person
    assert stack.turn(sid)["status"] == "waiting"
    assert stack.answer(approval["requestId"], "approve", who="bob").status == "settled"
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert turn["result"].startswith("Sent 250.00 to acct_42") and turn["result"].endswith("the second bob.")

    sid, _ = stack.start("pay $9 to acct_7", who="alice")  # one person's deny is enough
    [approval] = stack.pending(sid)
    assert stack.answer(approval["requestId"], "cancel", text="not this month", who="bob").status == "settled"
    assert stack.turn(sid)["result"] == "That did not happen: Denied by bob: not this month"


def test_a_release_is_approved_on_its_github_issue(tmp_path: Path) -> None:
    with github_in_process(tmp_path, agent="examples.github_release:agent") as github:
        github.comment(ALICE, f"@{BOT} release v1.2.0", issue=7)
        [(approval, prompt)] = github.prompts(7)
        assert approval.action is not None and approval.action.input == {"version": "1.2.0"}
        assert prompt.body.startswith("Approve release?")

        approved = github.comment(DAVE, "/approve", issue=7)  # a collaborator with write access (the fake's default)
        assert approved.comment.reactions == ["eyes", "+1"]
        assert github.said(7)[-1] == "Released 1.2.0 (approved by dave)."
        assert github.stack.turn(github.session(7))["status"] == "completed"
