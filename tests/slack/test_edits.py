"""Edit before approve in Slack: an editable approval's card has an Edit button; its modal has one input per
property; what does not fit the tool is shown in the modal, and a fitting edit approves the call with it."""

from __future__ import annotations

from typing import Any

from adapters.slack import render
from engine.answers.forms import FormField
from tests.slack.test_conversation import controls, texts
from tests.slack.test_render import request
from tests.slack.workspace import CHANNEL, USERS, Workspace
from tests.support.agent import read_ledger, script

EDITABLE = ("adjustable_refund", {"charge_id": "ch_1", "amount": 200})


def inputs(view: dict[str, Any]) -> dict[str, tuple[str, Any]]:
    """The modal's inputs by block id: the element's type and the value it shows."""
    shown = {}
    for block in (b for b in view["blocks"] if b["type"] == "input"):
        element = block["element"]
        value = element.get("initial_value", element.get("initial_option", element.get("initial_options")))
        shown[block["block_id"]] = (element["type"], value)
    return shown


def test_an_edit_that_does_not_fit_stays_in_the_modal_and_one_that_fits_approves(slack: Workspace) -> None:
    mention = slack.mention("alice", script([EDITABLE], final="refunded"))
    [card] = slack.cards(mention)
    assert controls(card) == ["Approve", "Edit", "Deny"]

    slack.ok(slack.click("alice", card, "Edit"))

    [opened] = slack.fake.called("views.open")
    view = opened.params["view"]
    assert opened.params["trigger_id"]
    assert inputs(view) == {"field|charge_id": ("plain_text_input", "ch_1"), "field|amount": ("number_input", "200"),
                            "field|currency": ("static_select", None), "field|notify": ("checkboxes", None),
                            "field|tags": ("plain_text_input", None)}
    refused = slack.submit_edit("alice", view, {"amount": "20", "tags": '{"vip": true}'})
    assert refused.status_code == 200
    assert refused.get_json() == {"response_action": "errors",
                                  "errors": {"field|tags": "Input should be a valid list"}}
    refused = slack.submit_edit("alice", view, {"tags": "[vip"})
    assert refused.get_json()["errors"]["field|tags"].startswith("expected JSON")
    slack.wait_idle()
    assert controls(card) == ["Approve", "Edit", "Deny"] and read_ledger() == []  # nothing stored, nothing ran

    slack.ok(slack.submit_edit("alice", view, {"amount": "20", "notify": True}))

    assert [(e["amount"], e["notify"]) for e in read_ledger()] == [(20, True)]
    assert f"Approved by <@{USERS['alice']}> with changes: amount 200 -&gt; 20, notify (unset) -&gt; true" \
        in texts(card)
    assert controls(card) == []


def test_the_edit_modal_keeps_within_slacks_limits() -> None:
    schema = {"type": "object", "required": ["plan"], "properties": {
        "plan": {"enum": [f"plan-{n}" for n in range(150)], "type": "string"},
        "notes": {"type": "string"}, "meta": {"type": "object"}}}
    shown = request(tool_input={"plan": "plan-3", "notes": "n" * 4000, "meta": {"k": 1}}, editable=True)
    shown.action.input_schema = schema  # type: ignore[union-attr]

    modal = render.edit_modal(shown, "C0TEST")

    assert all(len(modal[k]["text"]) <= 24 for k in ("title", "submit", "close"))
    assert inputs(modal) == {"field|plan": ("plain_text_input", "plan-3"),  # 150 options: typed, not a select
                             "field|meta": ("plain_text_input", '{"k": 1}')}
    assert "kept as proposed: notes" in modal["blocks"][-1]["elements"][1]["text"]
    errors = render.modal_errors(shown, [{"field": "meta.k", "problem": "bad"}, {"field": "x", "problem": "odd"}])
    assert errors == {"field|meta": "bad", "field|plan": "x: odd"}
    assert render.field_block(FormField("ok", "OK", "boolean", True), render.MISSING)["optional"] is True


def test_an_editable_external_requests_modal_is_built_from_its_json_schema_and_checks_by_it(
        slack: Workspace) -> None:
    created = slack.stack.client("bot:agent").post("/api/requests", json={
        "kind": "tool-approval", "editable": True, "to": {"channel": "slack", "address": {"channel": CHANNEL}},
        "action": {"toolName": "refund_charge", "input": {"charge": "ch_1", "amount": 200}, "inputSchema": {
            "type": "object", "required": ["charge", "amount"],
            "properties": {"charge": {"type": "string"}, "amount": {"type": "number", "maximum": 100},
                           "speed": {"enum": ["normal", "rush"]}}}}})
    assert created.status_code == 201, created.get_json()
    slack.wait_idle()
    [card] = [m for m in slack.fake.messages if m.channel == CHANNEL and m.versions[0]["blocks"]]
    assert controls(card) == ["Approve", "Edit", "Deny"]

    slack.ok(slack.click("alice", card, "Edit"))
    [opened] = slack.fake.called("views.open")
    view = opened.params["view"]
    assert inputs(view) == {"field|charge": ("plain_text_input", "ch_1"), "field|amount": ("number_input", "200"),
                            "field|speed": ("static_select", None)}
    refused = slack.submit_edit("alice", view, {"amount": "500"})
    assert refused.get_json() == {"response_action": "errors",
                                  "errors": {"field|amount": "500 is greater than the maximum of 100"}}
    slack.ok(slack.submit_edit("alice", view, {"amount": "20", "speed": "rush"}))
    slack.wait_idle()

    closed = slack.stack.client("bot:agent").get(f"/api/requests/{created.get_json()['requestId']}").get_json()
    assert (closed["outcome"], closed["response"]["input"]) == (
        "approved", {"charge": "ch_1", "amount": 20, "speed": "rush"})
    assert controls(card) == []
