"""POST /api/requests with `"editable": true` and an `action.inputSchema`: an agent running elsewhere has its
approvals corrected by people, each edit checked against its JSON Schema as an in-process tool's is against its
input model; the callback and the long-poll give the input proposed and the input approved. On SQLite with
in-process jobs, and on PostgreSQL with a real worker that signs callbacks."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from tests.conftest import Stack, make_stack, own_worker
from tests.gateway.test_api import expect_error
from tests.gateway.test_api_requests import APPROVAL, QUESTION, nothing_stored
from tests.support.hooks import Hooks, hook_server

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
SCHEMA = {"type": "object", "required": ["charge", "amount"], "additionalProperties": False,
          "properties": {"charge": {"type": "string"}, "amount": {"type": "number", "minimum": 1, "maximum": 100},
                         "speed": {"enum": ["normal", "rush"]}}}
EDITABLE = {**APPROVAL, "editable": True, "action": {**APPROVAL["action"], "input": {"charge": "ch_1", "amount": 200},
                                                     "inputSchema": SCHEMA}}


@pytest.fixture(params=["sqlite", "postgres"])
def api(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """A gateway whose callbacks are signed with SECRET (on PostgreSQL, by a worker of its own that has it)."""
    settings: dict[str, Any] = {"callback_secret": SECRET}
    if request.param == "postgres":
        settings["queue"] = own_worker(request, "edits", HITL_CALLBACK_SECRET=SECRET)
    with make_stack(request, request.param, tmp_path, **settings) as stack:
        yield stack


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    with hook_server() as receiver:
        yield receiver


def opened(api: Stack, body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    response = api.client("bot:agent").post("/api/requests", json=body)
    assert response.status_code == 201, response.get_data(as_text=True)
    created: dict[str, Any] = response.get_json()
    return f"/api/requests/{created['requestId']}", created


def test_an_edited_approval_is_checked_by_the_schema_and_called_back_with_both_inputs(api: Stack,
                                                                                      hooks: Hooks) -> None:
    one, created = opened(api, {**EDITABLE, "callbackUrl": hooks.url})
    assert created["editable"] and created["action"]["inputSchema"] == SCHEMA
    alice = api.client("alice")

    for wrong, field in [({"charge": "ch_1", "amount": "twenty"}, "amount"), ({"charge": "ch_1"}, "amount"),
                         ({"charge": "ch_1", "amount": 20, "speed": "now"}, "speed"),
                         ({"charge": "ch_1", "amount": 20, "note": "x"}, "input")]:
        error = expect_error(alice.patch(one, json={"optionId": "approve", "input": wrong}), 422, "invalid_input")
        assert [f["field"] for f in error["details"]["fields"]] == [field], error
        assert field in error["message"]
    error = expect_error(alice.patch(one, json={"optionId": "deny", "input": {"charge": "ch_1", "amount": 20}}),
                         422, "invalid_input")
    assert "only with approve" in error["message"]
    assert alice.get(one).get_json()["status"] == "pending"  # nothing changed

    polled: list[dict[str, Any]] = []
    poll = threading.Thread(target=lambda: polled.append(
        api.client("bot:agent").get(one, query_string={"wait": 20}).get_json()))
    poll.start()
    settled = alice.patch(one, json={"optionId": "approve", "input": {"charge": "ch_1", "amount": 20}})
    poll.join()
    api.wait_idle()

    assert (settled.status_code, settled.get_json()["outcome"]) == (200, "approved")
    [closed] = polled
    assert (closed["action"]["input"]["amount"], closed["response"]["input"]["amount"]) == (200, 20)
    assert closed["response"]["changes"] == "amount 200 -> 20"
    [sent] = hooks.received  # (the job that sent it has run)
    payload = Webhook(SECRET).verify(sent.body, sent.headers)
    assert (payload["request"]["action"]["input"], payload["request"]["response"]["input"]) == (
        {"charge": "ch_1", "amount": 200}, {"charge": "ch_1", "amount": 20})


def test_editable_without_a_schema_takes_any_object_and_a_request_not_editable_takes_none(api: Stack) -> None:
    one, created = opened(api, {**APPROVAL, "editable": True})
    assert created["action"]["inputSchema"] == {"type": "object"}
    settled = api.client("alice").patch(one, json={"optionId": "approve", "input": {"anything": [1, 2]}})
    assert settled.get_json()["response"]["input"] == {"anything": [1, 2]}

    fixed, _ = opened(api, APPROVAL)
    error = expect_error(api.client("alice").patch(fixed, json={"optionId": "approve", "input": {"amount": 2}}),
                         422, "invalid_input")
    assert "not editable" in error["message"]
    assert api.client("alice").get(fixed).get_json()["status"] == "pending"


@pytest.mark.parametrize(("change", "field"), [
    pytest.param({"action": {**EDITABLE["action"], "inputSchema": {"type": "nothing"}}}, "action.inputSchema",
                 id="not-a-schema"),
    pytest.param({"action": {**EDITABLE["action"], "input": {"a": 1}, "inputSchema": {
        "properties": {"a": {"$ref": "#/$defs/gone"}}}}}, "action.inputSchema", id="a-ref-it-does-not-hold"),
    pytest.param({"action": {**EDITABLE["action"], "input": {"a": 1}, "inputSchema": {
        "properties": {"a": {"$ref": "https://schemas.example/amount.json"}}}}}, "action.inputSchema",
        id="a-ref-it-would-fetch"),
    pytest.param({"editable": None}, "action.inputSchema", id="a-schema-without-editable"),
    pytest.param({"action": {**EDITABLE["action"], "inputSchema": {"description": "x" * 70_000}}},
                 "action.inputSchema", id="a-schema-too-long-to-keep"),
    pytest.param({**QUESTION, "action": None, "editable": True}, "editable", id="an-editable-question"),
    pytest.param({"action": {**EDITABLE["action"], "inputSchema": "object"}}, "action.inputSchema",
                 id="a-schema-not-an-object"),
])
def test_a_schema_that_cannot_check_edits_is_a_422_naming_the_field_and_stores_nothing(
        api: Stack, change: dict[str, Any], field: str) -> None:
    body = {key: value for key, value in {**EDITABLE, **change}.items() if value is not None}

    error = expect_error(api.client("bot:agent").post("/api/requests", json=body), 422, "invalid_request")

    details = error["details"] if isinstance(error["details"], list) else [error["details"]]
    assert field in [d["field"] for d in details], error
    nothing_stored(api)


def test_its_reminders_escalation_and_timeout_are_shown_as_they_were_asked_for(api: Stack) -> None:
    one, created = opened(api, {**APPROVAL, "expiresIn": 600, "onTimeout": "approve",
                                "remind": {"every": 60, "max": 2}, "escalate": {"after": 300, "approvers": ["bob"]}})

    shown = api.client("bot:agent").get(one).get_json()
    for request in (created, shown):
        assert (request["remind"], request["escalate"], request["onTimeout"]) == (
            {"every": 60, "max": 2}, {"after": 300, "to": [], "approvers": ["bob"]}, "approve")
    plain, _ = opened(api, QUESTION)
    assert {key: api.client("bot:agent").get(plain).get_json()[key] for key in ("remind", "escalate", "onTimeout")} \
        == {"remind": None, "escalate": None, "onTimeout": None}
