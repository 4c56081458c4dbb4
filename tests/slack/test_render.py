"""Block Kit rendering: what each request looks like, and that Slack never gets something over a limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.slack import render
from engine.answers.options import APPROVE, DENY
from engine.protocol import InputRequestOut
from tests.slack.workspace import USERS

ALICE = {"authenticator": "slack", "issuer": "slack:T0TEST", "principalType": "user",
         "principalId": "slack:T0TEST:UALICE", "attributes": {"userId": "UALICE", "teamId": "T0TEST"}}
OPERATOR = {"authenticator": "operator", "issuer": "hitl", "principalType": "user", "principalId": "dana"}
APPROVAL_OPTIONS = [APPROVE, DENY]  # the engine's own

# Block Kit limits, from CHANNELS.md and docs.slack.dev/reference/block-kit (independent of render.py)
LIMITS = {"blocks": 50, "section": 3000, "fields": 10, "field": 2000, "context": 3000, "context_elements": 10,
          "elements": 25, "button_text": 75, "button_value": 2000, "action_id": 255, "options": 100,
          "option_text": 75, "option_value": 150, "placeholder": 150, "confirm_title": 100, "confirm_text": 300,
          "confirm_button": 30, "message_text": 40000}


def request(kind: str = "tool-approval", prompt: str = "Approve refund?", options: Any = None,
            tool_input: dict[str, Any] | None = None, **fields: Any) -> InputRequestOut:
    action = None
    if kind == "tool-approval":
        action = {"kind": "tool-call", "callId": "call_1", "toolName": "refund",
                  "input": {"charge_id": "ch_1", "amount": 5} if tool_input is None else tool_input}
    data = {"requestId": "req_0123456789abcdef", "sessionId": "ses_1", "turnId": "turn_1", "kind": kind,
            "prompt": prompt, "action": action, "options": APPROVAL_OPTIONS if options is None else options,
            "allowFreeform": kind == "question", "display": "confirmation", "requestedBy": ALICE,
            "createdAt": datetime(2026, 1, 1, tzinfo=UTC), "expiresAt": None, "status": "pending", "outcome": None}
    return InputRequestOut.model_validate({**data, **fields})


def within_limits(message: dict[str, Any]) -> None:
    """Every Block Kit limit this gateway's messages can reach; a top-level text fallback is always there."""
    assert 0 < len(message["text"]) <= LIMITS["message_text"]
    assert len(message["blocks"]) <= LIMITS["blocks"]
    for block in message["blocks"]:
        if block["type"] == "section":
            assert len(block.get("text", {}).get("text", "")) <= LIMITS["section"]
            assert len(block.get("fields", [])) <= LIMITS["fields"]
            assert all(len(f["text"]) <= LIMITS["field"] for f in block.get("fields", []))
        elif block["type"] == "context":
            assert 0 < len(block["elements"]) <= LIMITS["context_elements"]
            assert all(len(e["text"]) <= LIMITS["context"] for e in block["elements"])
        elif block["type"] == "actions":
            assert 0 < len(block["elements"]) <= LIMITS["elements"]
            for element in block["elements"]:
                control_within_limits(element)


def control_within_limits(element: dict[str, Any]) -> None:
    assert len(element["action_id"]) <= LIMITS["action_id"]
    if element["type"] == "button":
        assert len(element["text"]["text"]) <= LIMITS["button_text"]
        assert len(element["value"]) <= LIMITS["button_value"]
        if "confirm" in element:
            confirm = element["confirm"]
            assert len(confirm["title"]["text"]) <= LIMITS["confirm_title"]
            assert len(confirm["text"]["text"]) <= LIMITS["confirm_text"]
            assert len(confirm["confirm"]["text"]) <= LIMITS["confirm_button"]
            assert len(confirm["deny"]["text"]) <= LIMITS["confirm_button"]
    else:
        assert element["type"] == "static_select"
        assert len(element["placeholder"]["text"]) <= LIMITS["placeholder"]
        assert 0 < len(element["options"]) <= LIMITS["options"]
        for option in element["options"]:
            assert len(option["text"]["text"]) <= LIMITS["option_text"]
            assert len(option["value"]) <= LIMITS["option_value"]
            assert len(option.get("description", {}).get("text", "")) <= LIMITS["option_text"]


def controls(message: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for b in message["blocks"] if b["type"] == "actions" for e in b["elements"]]


def test_an_approval_card() -> None:
    card = render.request_card(request())
    within_limits(card)
    assert card["text"] == "Approve refund?"
    assert card["blocks"][0]["text"]["text"] == "Approve refund?"
    assert [f["text"] for f in card["blocks"][1]["fields"]] == ["*charge_id*\nch_1", "*amount*\n5"]
    approve, deny = controls(card)
    assert (approve["text"]["text"], approve["style"], "confirm" in approve) == ("Approve", "primary", False)
    confirm = deny["confirm"]
    assert (deny["text"]["text"], deny["style"]) == ("Deny", "danger")
    assert (confirm["text"]["text"], confirm["confirm"]["text"], confirm["deny"]["text"]) == \
        ("Deny: Approve refund?", "Deny", "Go back")
    assert [e["text"] for e in card["blocks"][-1]["elements"]] == [f"Asked by <@{USERS['alice']}>"]


def test_controls_carry_only_the_request_and_the_option_number() -> None:
    approve, deny = controls(render.request_card(request()))
    assert (approve["action_id"], approve["value"]) == ("hitl|req_0123456789abcdef|1", "1")
    assert (deny["action_id"], deny["value"]) == ("hitl|req_0123456789abcdef|2", "2")


def test_a_question_has_a_menu_of_its_options_and_a_way_to_type() -> None:
    options = [{"id": "Red", "label": "Red", "description": "warm"}, {"id": "Blue", "label": "Blue"}]
    card = render.request_card(request("question", "Which color?", options))
    within_limits(card)
    menu, typing = controls(card)
    assert menu["placeholder"]["text"] == "Choose an option"
    assert [(o["text"]["text"], o["value"], o.get("description", {}).get("text")) for o in menu["options"]] == \
        [("Red", "1", "warm"), ("Blue", "2", None)]
    assert (typing["text"]["text"], typing["action_id"]) == ("Type an answer", "hitl|req_0123456789abcdef|type")


def test_a_question_without_options_is_answered_by_typing() -> None:
    card = render.request_card(request("question", "Any comment?", []))
    assert [c["text"]["text"] for c in controls(card)] == ["Type an answer"]
    assert len(card["blocks"]) == 3  # no fields: a question has no tool input


def test_a_session_limit_offers_continue_and_stop() -> None:
    options = [{"id": "continue", "label": "Continue", "style": "primary"},
               {"id": "stop", "label": "Stop", "style": "danger"}]
    card = render.request_card(request("session-limit", "The turn took 12 steps. Continue?", options))
    within_limits(card)
    assert [(c["text"]["text"], c["style"], "confirm" in c) for c in controls(card)] == \
        [("Continue", "primary", False), ("Stop", "danger", True)]


def test_every_limit_holds_for_an_enormous_request() -> None:
    long = "x" * 9000
    options = [{"id": f"{i}-{long[:300]}", "label": f"{i} {long[:200]}", "description": long[:500]}
               for i in range(1, 131)]
    tool_input = {f"field_{i}_{long[:200]}": long for i in range(25)}
    for kind, opts, data in [("question", options, None), ("tool-approval", None, tool_input)]:
        card = render.request_card(request(kind, long, opts, data))
        within_limits(card)
        assert card["blocks"][0]["text"]["text"].endswith("…")
        within_limits(render.settled_card(request(kind, long, opts, data, status="resolved", outcome="answered",
                                                  response={"text": long}, responder=ALICE)))
    question = render.request_card(request("question", "Pick", options))
    assert len(controls(question)[0]["options"]) == 100
    assert controls(question)[0]["options"][0]["text"]["text"].endswith("…")
    assert "first 100 of 130 options" in question["blocks"][-1]["elements"][-1]["text"]
    fields = render.request_card(request(tool_input=tool_input))["blocks"][1]["fields"]
    assert len(fields) == 10 and fields[-1]["text"] == "… and 16 more"
    assert fields[0]["text"].endswith("…")


def test_a_long_confirm_dialog_is_cut() -> None:
    options = [{"id": "stop", "label": "S" * 200, "style": "danger"}]
    within_limits(render.request_card(request("session-limit", "p" * 5000, options)))


def test_text_from_the_model_cannot_mention_anyone() -> None:
    card = render.request_card(request(prompt="Approve <!channel> & <@U999>?", tool_input={"<b>": "<!here>"}))
    assert card["text"] == "Approve &lt;!channel&gt; &amp; &lt;@U999&gt;?"
    assert card["blocks"][1]["fields"][0]["text"] == "*&lt;b&gt;*\n&lt;!here&gt;"
    assert render.message("hi <!everyone>") == {"text": "hi &lt;!everyone&gt;"}


def test_cutting_never_splits_an_escape() -> None:
    cut = render.fit("&" * 5000, 3000)
    assert len(cut) <= 3000 and cut.endswith("&amp;…")


@pytest.mark.parametrize("outcome,response,responder,line", [
    ("approved", {"optionId": "approve"}, ALICE, "Approved by <@UALICE>"),
    ("denied", {"optionId": "deny", "text": "too <much>"}, ALICE, "Denied by <@UALICE>: too &lt;much&gt;"),
    ("denied", {"optionId": "cancel"}, OPERATOR, "Denied by dana"),  # answered while the refusal was `cancel`
    ("ignored", None, ALICE, "No longer needed"),
    ("cancelled", None, ALICE, "No longer needed"),
    ("expired", None, None, "No longer needed"),
])
def test_a_settled_approval_says_what_became_of_it(outcome: str, response: Any, responder: Any, line: str) -> None:
    card = render.settled_card(request(status="resolved", outcome=outcome, response=response, responder=responder))
    within_limits(card)
    assert controls(card) == []
    assert card["blocks"][-1]["text"]["text"] == line
    assert card["text"] == f"{line}: Approve refund?"


def test_a_settled_question_names_the_answer() -> None:
    options = [{"id": "Red", "label": "Red"}, {"id": "Blue", "label": "Blue"}]
    chosen = render.settled_card(request("question", "Which?", options, status="resolved", outcome="answered",
                                         response={"optionId": "Blue"}, responder=ALICE))
    typed = render.settled_card(request("question", "Which?", options, status="resolved", outcome="answered",
                                        response={"text": "teal"}, responder=ALICE))
    assert chosen["blocks"][-1]["text"]["text"] == "Answered: Blue (by <@UALICE>)"
    assert typed["blocks"][-1]["text"]["text"] == "Answered: teal (by <@UALICE>)"


def test_a_refusal_names_slack_people_as_mentions() -> None:
    text = render.refusal(request(), "only slack:T0TEST:UALICE may answer this request")
    assert text == "You can't answer \"Approve refund?\": only <@UALICE> may answer this request"


def test_the_answer_modal_respects_its_limits() -> None:
    modal = render.answer_modal(request("question", "q" * 5000, []), "C0TEST")
    assert modal["private_metadata"] == "req_0123456789abcdef|C0TEST"
    assert all(len(modal[k]["text"]) <= 24 for k in ("title", "submit", "close"))
    assert len(modal["blocks"][0]["text"]["text"]) <= LIMITS["section"]


def test_an_expiry_is_shown_in_the_readers_time_zone() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC) + timedelta(minutes=30)
    [_, expires] = render.notes(request(expiresAt=at))
    assert expires == f"Expires <!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{at.isoformat()}>"
