"""SMS end to end: PostgreSQL, Redis and a real `hitl worker` process sending through the fake Twilio API."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.agent import read_ledger, script
from tests.twilio.support import ALICE, OURS, twilio_stack

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})


def test_a_turn_parks_twice_and_completes_over_sms(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    with twilio_stack(request, "postgres", tmp_path) as sms:
        sms.text(ALICE, script([REFUND, QUESTION], final="all set"))
        session_id = sms.session_at(ALICE)
        assert sms.inbox(ALICE) == [
            "step 1",
            "Which color?\n1. Red - warm\n2. Blue - cool\nReply with a number or your answer.",
        ]
        assert sms.stack.turn(session_id)["status"] == "waiting"

        sms.text(ALICE, "2")
        confirmation, prompt = sms.inbox(ALICE)[2:]
        assert confirmation == "Which color? Answered: Blue (by alice)."
        head, tool_input, *choices = prompt.split("\n")
        assert head == "Approve refund?" and sorted(tool_input.split(", ")) == ["amount=5", "charge_id=ch_1"]
        assert choices == ["1. Approve", "2. Deny", "Reply 1 or 2 (or approve / deny)."]
        assert read_ledger() == []

        sms.text(ALICE, "approve")
        turn = sms.stack.turn(session_id)
        assert turn["status"] == "completed"
        assert [(r["kind"], r["outcome"]) for r in turn["requests"]] == [("question", "answered"),
                                                                        ("tool-approval", "approved")]
        [refund] = read_ledger()
        assert (refund["charge_id"], refund["responder"]) == ("ch_1", f"twilio:{ALICE}")
        confirmation, final = sms.inbox(ALICE)[4:]
        assert confirmation == "Approve refund? Approved by alice."
        assert final.startswith("all set") and '"answer": "Blue"' in final and '"refunded": 5' in final
        assert {(m.sender, m.user) for m in sms.fake.sent} == {(OURS, sms.stack.settings.twilio_account_sid)}
