"""Edit before approve: an approver corrects a call's input, the call runs once with it, the audit keeps both."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import ApprovalPolicy, always, never, tool
from engine.answers.edits import changes, schema_problems, schema_refused
from engine.answers.forms import form_fields
from engine.errors import InvalidInput, ToolDefinitionError
from engine.jobs.recovery import sweep
from engine.policies import ResponseContext
from tests.conftest import Stack, sqlite_settings
from tests.engine.test_candidate_recovery import Dying, later, overdue
from tests.support.agent import read_ledger, script

PROPOSED = {"charge_id": "ch_1", "amount": 200}


def ran(tool_name: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool_name]


@pytest.fixture
def sqlite(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def test_an_edited_refund_runs_once_with_the_edited_amount_and_the_audit_keeps_both(stack: Stack) -> None:
    sid, _ = stack.start(script([("adjustable_refund", PROPOSED)]))
    [request] = stack.pending(sid)
    assert request["editable"] is True
    schema = request["action"]["inputSchema"]
    assert schema["properties"]["currency"]["enum"] == ["usd", "eur"] and schema["required"] == ["charge_id", "amount"]

    result = stack.answer(request["requestId"], "approve", edited={"charge_id": "ch_1", "amount": 20})

    assert result.status == "settled"
    assert [(e["amount"], e["responder"]) for e in ran("adjustable_refund")] == [(20, "alice")]
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert '{"approval": "Approved by alice with changes: amount 200 -> 20", "output": {"refunded": 20.0' \
        in turn["result"]  # what the model read
    [audited] = turn["requests"]
    assert audited["action"]["input"] == PROPOSED  # proposed
    assert audited["response"] == {"optionId": "approve", "text": None, "input": {"charge_id": "ch_1", "amount": 20},
                                   "changes": "amount 200 -> 20"}  # approved
    assert [(c["decision"], c["input"], c["text"]) for c in audited["candidates"]] == \
        [("approve", {"charge_id": "ch_1", "amount": 20}, None)]
    [call] = turn["toolCalls"]
    assert (call["input"], call["status"]) == ({"charge_id": "ch_1", "amount": 20}, "completed")  # what ran
    [called] = [e for e in stack.events(sid) if e["type"] == "action.called"]
    assert called["data"]["input"]["amount"] == 20


def test_an_edit_that_does_not_fit_the_tool_is_refused_and_changes_nothing(sqlite: Stack) -> None:
    sid, _ = sqlite.start(script([("adjustable_refund", PROPOSED)]))
    [request] = sqlite.pending(sid)
    before = sqlite.events(sid)

    with pytest.raises(InvalidInput) as refused:
        sqlite.answer(request["requestId"], "approve", edited={"charge_id": "ch_1", "amount": "lots", "cur": "eur"})

    assert "amount: Input should be a valid number" in refused.value.message
    assert [f["field"] for f in refused.value.details["fields"]] == ["amount", "cur"]
    assert sqlite.events(sid) == before  # no candidate, no event
    assert sqlite.turn(sid)["requests"][0]["candidates"] == []
    assert [r["requestId"] for r in sqlite.pending(sid)] == [request["requestId"]]
    assert ran("adjustable_refund") == []


@pytest.mark.parametrize(("call", "option", "why"), [
    (("refund", PROPOSED), "approve", "is not editable"),
    (("adjustable_refund", PROPOSED), "deny", "an edited input goes only with approve"),
])
def test_an_input_is_refused_where_no_edit_is_taken(sqlite: Stack, call: tuple[str, dict[str, Any]], option: str,
                                                    why: str) -> None:
    sid, _ = sqlite.start(script([call]))
    [request] = sqlite.pending(sid)
    assert request["editable"] is (call[0] == "adjustable_refund")

    with pytest.raises(InvalidInput, match=why):
        sqlite.answer(request["requestId"], option, edited={"charge_id": "ch_1", "amount": 2})

    assert sqlite.pending(sid) == [request]


def test_an_approve_that_sends_the_proposed_input_again_is_a_plain_approve(sqlite: Stack) -> None:
    sid, _ = sqlite.start(script([("adjustable_refund", PROPOSED)]))
    [request] = sqlite.pending(sid)

    sqlite.answer(request["requestId"], "approve", edited={"amount": 200.0, "charge_id": "ch_1"})

    assert sqlite.turn(sid)["requests"][0]["response"] == {"optionId": "approve", "text": None}
    assert '"approval"' not in sqlite.turn(sid)["result"]
    assert [e["amount"] for e in ran("adjustable_refund")] == [200]


def test_an_edited_once_approval_grants_the_approved_input_only(sqlite: Stack) -> None:
    asked = {"account": "acct_1", "limit": 500}
    sid, _ = sqlite.start(script([("set_limit", asked)], [("set_limit", {"account": "acct_1", "limit": 50})],
                                 [("set_limit", asked)]))
    [first] = sqlite.pending(sid)

    sqlite.answer(first["requestId"], "approve", edited={"account": "acct_1", "limit": 50})

    assert [e["limit"] for e in ran("set_limit")] == [50, 50]  # the second call, with the approved input, ran unasked
    [second] = sqlite.pending(sid)  # the input the approver corrected asks again
    assert second["action"]["input"] == asked
    sqlite.answer(second["requestId"], "approve")
    assert [e["limit"] for e in ran("set_limit")] == [50, 50, 500]


def test_a_response_policy_sees_the_edit_and_the_sweep_judges_it_again_with_it(
        sqlite: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate whose process died while its policy ran keeps its edit: the sweep settles it with that input."""
    seen: list[Any] = []

    def small_refunds(ctx: ResponseContext) -> dict[str, str]:
        seen.append(ctx.response.input)
        return {"status": "allowed" if (ctx.response.input or {}).get("amount", 1000) <= 50 else "rejected"}

    monkeypatch.setattr(sqlite.rt.agent, "response_policy", Dying(then=small_refunds))
    sid, _ = sqlite.start(script([("adjustable_refund", PROPOSED)]))
    [request] = sqlite.pending(sid)
    with pytest.raises(SystemExit):
        sqlite.answer(request["requestId"], "approve", who="bob", edited={"charge_id": "ch_1", "amount": 20},
                      wait=False)

    with later(sqlite, overdue(sqlite)):
        assert sweep(sqlite.rt).rejudged == 1
    sqlite.wait_idle()

    assert seen == [{"charge_id": "ch_1", "amount": 20}]
    assert [(e["amount"], e["responder"]) for e in ran("adjustable_refund")] == [(20, "bob")]
    assert "Approved by bob with changes: amount 200 -> 20" in sqlite.turn(sid)["result"]


def test_changes_name_each_field_as_json_writes_it() -> None:
    assert changes({"amount": 200, "note": "x"}, {"amount": 20.0, "tags": ["a"]}) == \
        'amount 200 -> 20, note "x" -> (unset), tags (unset) -> ["a"]'
    assert changes({"amount": 20, "flag": True}, {"amount": 20.0, "flag": True}) is None
    assert changes({"flag": 1}, {"flag": True}) == "flag 1 -> true"


def test_a_tool_that_asks_nobody_cannot_be_editable() -> None:
    def noop(amount: float) -> None: ...

    with pytest.raises(ToolDefinitionError, match="editable=True needs an approval policy"):
        tool(noop, approval=never(), editable=True)
    assert tool(noop, approval=ApprovalPolicy(request=always(), editable=True)).edit_schema == {
        "properties": {"amount": {"title": "Amount", "type": "number"}}, "required": ["amount"], "type": "object",
        "additionalProperties": False}
    assert json.dumps(tool(noop, approval=always()).edit_schema) == "null"


def test_a_json_schema_names_each_field_an_edit_gets_wrong_by_its_path() -> None:
    check = schema_problems({"type": "object", "required": ["amount", "items"], "properties": {
        "amount": {"type": "number"},
        "items": {"type": "array", "items": {"type": "object", "required": ["sku"], "properties": {
            "sku": {"type": "string"}}}}}})
    assert check({"amount": 2, "items": [{"sku": "a"}]}) == []
    assert [p["field"] for p in check({"amount": "2", "items": [{"sku": "a"}, {"sku": 3}, {}]})] == [
        "amount", "items.1.sku", "items.2.sku"]
    assert check({"items": []}) == [{"field": "amount", "problem": "'amount' is a required property"}]
    assert schema_problems({"properties": {"a": {"$ref": "#/$defs/gone"}}})({"a": 1})[0]["field"] == "input"
    assert schema_refused({"type": "nothing"}, {}) is not None
    assert schema_refused({"$schema": 7}, {}) is not None
    assert schema_refused({"properties": {"a": {"pattern": "("}}}, {"a": "x"}) is not None
    assert schema_refused({"properties": {"a": {"$ref": "https://schemas.example/a.json"}}}, {"a": 1}) is not None
    assert schema_refused({"type": "object"}, {}) is None


def test_a_form_is_built_from_draft_07_definitions_too() -> None:
    [speed] = form_fields({"definitions": {"speed": {"enum": ["normal", "rush"]}},
                           "properties": {"speed": {"$ref": "#/definitions/speed"}}})
    assert (speed.kind, speed.options) == ("enum", ("normal", "rush"))
