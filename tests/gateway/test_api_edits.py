"""Edit before approve through the REST API: PATCH and `inputResponses` carry the edited input; a bad one is a
422 naming the field, and changes nothing."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Stack, sqlite_settings
from tests.gateway.test_api import event_count, expect_error, parked, pending_ids, ran
from tests.support.agent import script

EDITABLE = script([("adjustable_refund", {"charge_id": "ch_1", "amount": 200})])


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def test_patch_approves_with_the_edited_input(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client, EDITABLE)
    shown = client.get(f"/api/requests/{request_id}").get_json()
    assert shown["editable"] is True and shown["action"]["inputSchema"]["type"] == "object"

    answered = client.patch(f"/api/requests/{request_id}", json={
        "optionId": "approve", "input": {"charge_id": "ch_1", "amount": 20, "currency": "eur"}})

    assert answered.status_code == 200, answered.get_json()
    assert answered.get_json()["response"]["changes"] == 'amount 200 -> 20, currency (unset) -> "eur"'
    assert answered.get_json()["action"]["input"] == {"charge_id": "ch_1", "amount": 200}
    sqlite_stack.wait_idle()
    assert [(e["amount"], e["currency"]) for e in ran("adjustable_refund")] == [(20, "eur")]


def test_input_responses_carry_the_edited_input_too(sqlite_stack: Stack) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client, EDITABLE)

    posted = client.post(f"/api/sessions/{session_id}/input", json={"inputResponses": [
        {"requestId": request_id, "optionId": "approve", "input": {"charge_id": "ch_2", "amount": 200}}]})

    assert posted.status_code == 202
    assert posted.get_json()["results"][0]["request"]["response"]["input"]["charge_id"] == "ch_2"
    sqlite_stack.wait_idle()
    assert [e["charge_id"] for e in ran("adjustable_refund")] == ["ch_2"]


@pytest.mark.parametrize(("message", "body", "status", "code", "fields"), [
    pytest.param(EDITABLE, {"optionId": "approve", "input": {"charge_id": "ch_1", "amount": -1, "currency": "gbp"}},
                 422, "invalid_input", ["currency"], id="enum"),
    pytest.param(EDITABLE, {"optionId": "approve", "input": {"amount": "twenty"}}, 422, "invalid_input",
                 ["charge_id", "amount"], id="missing-and-not-a-number"),
    pytest.param(EDITABLE, {"optionId": "deny", "input": {"charge_id": "ch_1", "amount": 2}}, 422, "invalid_input",
                 None, id="with-a-deny"),
    pytest.param(script([("refund", {"charge_id": "ch_1", "amount": 200})]),
                 {"optionId": "approve", "input": {"charge_id": "ch_1", "amount": 2}}, 422, "invalid_input", None,
                 id="not-editable"),
    pytest.param(EDITABLE, {"optionId": "approve", "input": [20]}, 400, "invalid_body", None, id="not-an-object"),
])
def test_an_edit_that_is_refused_changes_nothing(sqlite_stack: Stack, message: str, body: dict[str, Any],
                                                 status: int, code: str, fields: list[str] | None) -> None:
    client = sqlite_stack.client("alice")
    session_id, request_id = parked(sqlite_stack, client, message)
    before = event_count(client, session_id)

    error = expect_error(client.patch(f"/api/requests/{request_id}", json=body), status, code)

    if fields is not None:
        assert [f["field"] for f in error["details"]["fields"]] == fields
        assert error["message"].startswith("the edited input does not fit adjustable_refund: ")
    assert pending_ids(client, session_id) == [request_id]
    assert event_count(client, session_id) == before
    assert ran("adjustable_refund") == ran("refund") == []
