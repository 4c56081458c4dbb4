"""Edit before approve on GitHub: `/approve amount=20` approves an editable request with those fields, typed by
its schema; fields that do not fit approve nothing, and the writer is told why."""

from __future__ import annotations

import pytest

from adapters.github.parse import approve_fields
from tests.github.support import ALICE, BOT, REPO, Github
from tests.support.agent import read_ledger, script

EDITABLE = script([("adjustable_refund", {"charge_id": "ch_1", "amount": 200})])


def test_approve_with_fields_runs_the_call_with_them(github: Github) -> None:
    github.comment(ALICE, f"@{BOT} {EDITABLE}")
    [(_, prompt)] = github.prompts()
    assert "Reply `/approve`, `/approve charge_id=<value>` to change fields first" in prompt.body

    approve = github.comment(ALICE, "/approve amount=20 currency=eur tags='[\"vip\"]' the customer paid 20")

    assert approve.comment.reactions == ["eyes", "+1"]
    assert '**Approved by alice with changes: amount 200 -> 20, currency (unset) -> "eur", tags (unset) -> ["vip"].**' \
        in prompt.body
    assert [(e["amount"], e["currency"], e["tags"]) for e in read_ledger()] == [(20, "eur", ["vip"])]


@pytest.mark.parametrize(("command", "why"), [
    ("/approve amount=lots", "`amount`: expected a number"),
    ("/approve currency=gbp", "`currency`: expected one of usd, eur"),
    ("/approve tags=5", "`tags`: Input should be a valid list"),  # typed, but the tool refuses it
    ("/approve but make it amount=20", "`amount`: write the fields to change right after /approve"),
])
def test_fields_that_do_not_fit_approve_nothing_and_the_writer_is_told(github: Github, command: str, why: str) -> None:
    github.comment(ALICE, f"@{BOT} {EDITABLE}")
    [(request, prompt)] = github.prompts()

    refused = github.comment(ALICE, command)

    assert refused.comment.reactions == ["-1"]  # (an ignored comment is not acknowledged as received)
    assert github.said()[-1] == ("@alice your `/approve` of “Approve adjustable refund?” was not applied, and nothing "
                                 f"was approved: {why}")
    assert "Reply `/approve`" in prompt.body and read_ledger() == []
    assert [r.request_id for r, _ in github.prompts()] == [request.request_id]


def test_fields_for_a_request_that_is_not_editable_approve_nothing(github: Github) -> None:
    github.comment(ALICE, f"@{BOT} {script([('refund', {'charge_id': 'ch_1', 'amount': 200})])}")

    github.comment(ALICE, "/approve amount=20")

    assert "this request cannot be edited; reply `/approve` to approve it as proposed" in github.said()[-1]
    assert read_ledger() == []


def test_approve_fields_are_the_leading_name_value_words() -> None:
    assert approve_fields('amount=20 note="two words" meta=\'{"a": 1}\' then a note x=1') == (
        {"amount": "20", "note": "two words", "meta": '{"a": 1}'}, "then a note x=1")
    assert approve_fields(r'say="a \"quoted\" word"') == ({"say": 'a "quoted" word'}, "")
    assert approve_fields("looks good") == ({}, "looks good")
    assert approve_fields(None) == ({}, "")


def test_an_editable_external_request_takes_fields_checked_by_its_json_schema(github: Github) -> None:
    created = github.stack.client("bot:agent").post("/api/requests", json={
        "kind": "tool-approval", "editable": True, "to": {"channel": "github", "address": {"repo": REPO, "issue": 6}},
        "action": {"toolName": "refund_charge", "input": {"charge": "ch_1", "amount": 200}, "inputSchema": {
            "type": "object", "properties": {"charge": {"type": "string"},
                                             "amount": {"type": "number", "maximum": 100}}}}})
    assert created.status_code == 201, created.get_json()
    github.wait_idle()
    [(_, prompt)] = github.prompts(issue=6)
    assert "`/approve charge=<value>` to change fields first" in prompt.body

    refused = github.comment(ALICE, "/approve amount=500", issue=6)
    assert refused.comment.reactions == ["-1"]
    assert github.said(issue=6)[-1].endswith("nothing was approved: `amount`: 500 is greater than the maximum of 100")

    github.comment(ALICE, "/approve amount=20", issue=6)
    closed = github.stack.client("bot:agent").get(f"/api/requests/{created.get_json()['requestId']}").get_json()
    assert (closed["outcome"], closed["response"]["input"]) == ("approved", {"charge": "ch_1", "amount": 20})
    assert "**Approved by alice with changes: amount 200 -> 20.**" in prompt.body
