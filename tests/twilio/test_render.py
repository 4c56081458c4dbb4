"""SMS length: GSM-7 or UCS-2, segments, and prompts kept within two segments."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from adapters.twilio.render import MAX_BODY, encoding, render_message, render_prompt, segments
from engine.answers.options import APPROVE, DENY
from engine.channels.contract import QueuePosition
from engine.protocol import InputRequestOut

ONE = QueuePosition(1, 1)


def request(**fields: Any) -> InputRequestOut:
    base: dict[str, Any] = {
        "requestId": "req_1", "sessionId": "ses_1", "turnId": "turn_1", "kind": "tool-approval",
        "prompt": "Approve refund?", "action": {"kind": "tool-call", "callId": "c1", "toolName": "refund",
                                                "input": {"charge_id": "ch_1", "amount": 5}},
        "options": [APPROVE, DENY],  # the engine's own
        "allowFreeform": False, "display": "confirmation", "requestedBy": None,
        "createdAt": datetime.now(UTC), "expiresAt": None, "status": "pending", "outcome": None}
    return InputRequestOut.model_validate({**base, **fields})


@pytest.mark.parametrize(("text", "expected"), [
    ("a" * 160, ("GSM-7", 1)), ("a" * 161, ("GSM-7", 2)), ("a" * 306, ("GSM-7", 2)), ("a" * 307, ("GSM-7", 3)),
    ("€" * 80, ("GSM-7", 1)), ("€" * 81, ("GSM-7", 2)),  # the extension table costs two septets
    ("a" * 152 + "€" + "a" * 152, ("GSM-7", 3)),  # 306 septets, but an escape is never split across parts
    ("Über café, £5 @ 10:00 ¿Ñ?", ("GSM-7", 1)), ("naïve", ("UCS-2", 1)),  # the basic table's accents only
    ("a" * 70, ("GSM-7", 1)),
    ("a" * 69 + "’", ("UCS-2", 1)), ("a" * 70 + "’", ("UCS-2", 2)),  # one smart quote: UCS-2 for all
    ("a" * 68 + "😀", ("UCS-2", 1)), ("a" * 69 + "😀", ("UCS-2", 2)),  # an emoji is two UTF-16 units
    ("a" * 134 + "’", ("UCS-2", 3)), ("😀" * 67, ("UCS-2", 3)),  # 134 units, 33 pairs per part
])
def test_segments(text: str, expected: tuple[str, int]) -> None:
    assert (encoding(text), segments(text)) == expected


def test_an_emoji_switches_the_whole_message_to_ucs2() -> None:
    plain = "Approve refund?\ncharge_id=ch_1, amount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."
    assert (encoding(plain), segments(plain)) == ("GSM-7", 1)
    with_emoji = plain.replace("ch_1", "ch_1 🚀")
    assert (encoding(with_emoji), segments(with_emoji)) == ("UCS-2", 2)


def test_a_long_tool_input_is_cut_with_a_gsm7_marker_within_two_segments() -> None:
    long_input = {"charge_id": "ch_1", "reason": "x" * 1000, "amount": 5}
    text = render_prompt(request(action={"kind": "tool-call", "callId": "c1", "toolName": "refund",
                                         "input": long_input}), ONE)
    lines = text.split("\n")
    assert lines[0] == "Approve refund?" and lines[1].startswith("charge_id=ch_1, reason=xxx")
    assert lines[1].endswith("...") and lines[2:] == ["1. Approve", "2. Deny", "Reply 1 or 2 (or approve / deny)."]
    assert encoding(text) == "GSM-7" and segments(text) == 2 and len(text) > 280  # it uses the room it has


def test_a_long_input_with_an_emoji_is_cut_to_two_ucs2_segments() -> None:
    text = render_prompt(request(action={"kind": "tool-call", "callId": "c1", "toolName": "post",
                                         "input": {"text": "🚀 " * 300}}), ONE)
    assert encoding(text) == "UCS-2" and segments(text) == 2
    assert "..." in text and text.endswith("Reply 1 or 2 (or approve / deny).")


def test_a_long_question_and_descriptions_are_cut_within_two_segments() -> None:
    question = request(kind="question", prompt="Which plan? " + "details " * 100, action=None, allowFreeform=True,
                       display="select", options=[{"id": "Basic", "label": "Basic", "description": "d" * 300},
                                                  {"id": "Pro", "label": "Pro", "description": "e" * 300}])
    text = render_prompt(question, QueuePosition(2, 3))
    assert segments(text) <= 2
    assert text.startswith("(2 of 3) Which plan? details")
    assert "\n1. Basic - ddd" in text and "\n2. Pro - eee" in text
    assert text.endswith("Reply with a number or your answer.")


def test_short_prompts_are_left_whole() -> None:
    question = request(kind="question", prompt="Which color?", action=None, allowFreeform=True, display="select",
                       options=[{"id": "Red", "label": "Red", "description": "warm"}, {"id": "Blue", "label": "Blue"}])
    assert render_prompt(question, ONE) == "Which color?\n1. Red - warm\n2. Blue\nReply with a number or your answer."
    free = request(kind="question", prompt="Any comment?", action=None, allowFreeform=True, display="text",
                   options=[])
    assert render_prompt(free, ONE) == "Any comment?\nReply with your answer."
    limit = request(kind="session-limit", prompt="Keep going?", action=None,
                    options=[{"id": "continue", "label": "Continue"}, {"id": "stop", "label": "Stop"}])
    assert render_prompt(limit, ONE) == "Keep going?\n1. Continue\n2. Stop here\nReply 1 or 2."  # no lone "Stop"


def test_a_message_body_stays_within_twilios_limit() -> None:
    assert render_message("short") == "short"
    long = render_message("word " * 1000)
    assert len(long) == MAX_BODY and long.endswith("...")


def test_long_labels_are_cut_too_so_the_question_stays_readable() -> None:
    """Three labels of about 35 characters and one emoji in a label: UCS-2, so two segments are 134 units. The
    labels take their share of the cut, not the question alone (it was cut to "Whi...", in three segments)."""
    labels = ["Blue-green with a canary 🚀", "Rolling update, one pod at a time",
              "Recreate: stop everything, then start"]
    question = request(kind="question", prompt="Which deployment strategy should I use tonight?", action=None,
                       allowFreeform=True, display="select", options=[{"id": x, "label": x} for x in labels])
    text = render_prompt(question, ONE)
    assert segments(text) <= 2
    lines = text.split("\n")
    assert lines[0].startswith("Which deployment") and len(lines[0]) >= 20
    assert [line[:8] for line in lines[1:4]] == ["1. Blue-", "2. Rolli", "3. Recre"]
    assert lines[4] == "Reply with a number or your answer."


@pytest.mark.parametrize(("labels", "free", "how"), [
    (["Yes", "No"], True, "Reply 1 or 2 (the number, not the word) or your answer."),
    (["Retry", "Skip", " quit "], True, "Reply with a number from 1 to 3 (the number, not the word) or your answer."),
    (["Continue", "Cancel"], False, "Reply 1 or 2 (the number, not the word)."),
])
def test_a_question_whose_label_is_a_keyword_asks_for_the_number(labels: list[str], free: bool, how: str) -> None:
    """Twilio takes a lone YES, STOP, CANCEL, QUIT... as opt-in or opt-out: replying such a label would answer
    nothing, or stop every text to the number. The prompt says to reply with the number instead."""
    question = request(kind="question", prompt="Proceed?", action=None, allowFreeform=free, display="select",
                       options=[{"id": x, "label": x} for x in labels])
    assert render_prompt(question, ONE).split("\n")[-1] == how
