"""POST /api/requests with `remind`, `escalate` and `onTimeout`: an agent running elsewhere gets the reminders,
escalation and timeout outcomes of an agent's request, through the same code (SQLite + in-process jobs)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from engine.answers.conversation import post_message
from engine.jobs.recovery import sweep
from engine.people import save_person
from engine.protocol import Principal
from engine.store.tables import Session
from tests.conftest import Stack
from tests.gateway.test_api import expect_error
from tests.gateway.test_api_requests import APPROVAL, QUESTION, api_stack, nothing_stored

ROOM = {"channel": "fake", "address": {"room": "ops"}}
BOSS = {"channel": "fake", "address": {"room": "boss"}}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Stack]:
    stack = api_stack(tmp_path)
    yield stack
    stack.close()


def later(stack: Stack, seconds: float) -> None:
    now = stack.rt.clock()
    stack.rt.clock = lambda: now + timedelta(seconds=seconds)


def opened(stack: Stack, **fields: Any) -> dict[str, Any]:
    response = stack.client("bot:agent").post("/api/requests", json={**APPROVAL, "to": ROOM, **fields})
    assert response.status_code == 201, response.get_data(as_text=True)
    stack.wait_idle()
    body: dict[str, Any] = response.get_json()
    return body


def test_an_external_request_reminds_and_escalates_where_it_is_shown(api: Stack) -> None:
    request = opened(api, approvers=["alice"], remind={"every": 60, "max": 1},
                     escalate={"after": 120, "to": BOSS, "approvers": ["bob"]})
    one = f"/api/requests/{request['requestId']}"
    calls = api.rt.channels["fake"].calls  # type: ignore[attr-defined]
    later(api, 61)
    assert sweep(api.rt).reminded == 1
    api.wait_idle()
    assert [c[:3] for c in calls if c[0] == "remind"] == [("remind", request["requestId"], 1)]
    expect_error(api.client("bob").patch(one, json={"optionId": "approve"}), 404, "not_found")

    later(api, 121)
    assert sweep(api.rt).escalated == 1
    api.wait_idle()
    assert [c[:2] for c in calls if c[0] == "show"] == [("show", request["requestId"])] * 2  # the room, the boss
    shown = api.client("bot:agent").get(one).get_json()
    assert (shown["reminded"], shown["escalatedAt"] is not None, shown["approvers"]) == (1, True, ["alice"])
    approved = api.client("bob").patch(one, json={"optionId": "approve"})
    assert (approved.status_code, approved.get_json()["responder"]["principalId"]) == (200, "bob")


def test_an_external_approval_approved_on_timeout_says_the_app_did(api: Stack) -> None:
    request = opened(api, expiresIn=30, onTimeout="approve")
    assert request["onTimeout"] == "approve"
    later(api, 31)
    assert sweep(api.rt).expired == 1

    closed = api.client("bot:agent").get(f"/api/requests/{request['requestId']}").get_json()
    assert (closed["outcome"], closed["responder"]["principalId"]) == ("approved", "app")
    assert closed["responder"]["attributes"] == {"reason": "approved on timeout"}


@pytest.mark.parametrize(("change", "field", "code"), [
    pytest.param({"onTimeout": "approve"}, "onTimeout", "invalid_request", id="approve-without-expiry"),
    pytest.param({"onTimeout": "dismiss", "expiresIn": 60}, "onTimeout", "invalid_request",
                 id="an-approval-dismissed"),
    pytest.param({**QUESTION, "action": None, "onTimeout": "approve", "expiresIn": 60}, "onTimeout",
                 "invalid_request", id="a-question-approved"),
    pytest.param({"onTimeout": "later"}, "onTimeout", "invalid_request", id="unknown-outcome"),
    pytest.param({"remind": {"every": 0}}, "remind.every", "invalid_request", id="remind-at-once"),
    pytest.param({"remind": {"every": 60, "max": 0}}, "remind.max", "invalid_request", id="no-reminder"),
    pytest.param({"remind": {"max": 2}}, "remind.every", "invalid_request", id="remind-without-every"),
    pytest.param({"remind": {"every": 60, "often": True}}, "remind.often", "invalid_request", id="remind-unknown-key"),
    pytest.param({"escalate": {"after": 60}}, "escalate", "invalid_request", id="escalate-to-nobody"),
    pytest.param({"escalate": {"to": BOSS}}, "escalate.after", "invalid_request", id="escalate-without-after"),
    pytest.param({"escalate": {"after": 60, "approvers": []}}, "escalate.approvers", "invalid_request",
                 id="no-escalation-approvers"),
    pytest.param({"escalate": {"after": 60, "to": {"channel": "sms", "address": {"to": "+1"}}}},
                 "escalate.to.0.channel", "unknown_channel", id="escalate-to-unknown-channel"),
    pytest.param({"escalate": {"after": 60, "to": [ROOM, {"channel": "fake", "address": {"street": "x"}}]}},
                 "escalate.to.1.address", "invalid_address", id="escalate-to-bad-address"),
])
def test_a_schedule_that_does_not_fit_is_a_422_naming_the_field_and_stores_nothing(
        api: Stack, change: dict[str, Any], field: str, code: str) -> None:
    body = {key: value for key, value in {**APPROVAL, **change}.items() if value is not None}

    error = expect_error(api.client("bot:agent").post("/api/requests", json=body), 422, code)

    details = error["details"] if isinstance(error["details"], list) else [error["details"]]
    assert field in [d["field"] for d in details], error
    nothing_stored(api)


def test_a_refusal_at_an_escalation_place_is_told_at_that_place(api: Stack) -> None:
    request = opened(api, approvers=["alice"], escalate={"after": 120, "to": BOSS, "approvers": ["bob"]})
    channel = api.rt.channels["fake"]
    later(api, 121)
    assert sweep(api.rt).escalated == 1
    api.wait_idle()
    with api.rt.db.read() as db:
        boss = db.execute(select(Session.id).where(Session.address == "fake:boss:")).scalar_one()
    stranger = Principal(authenticator="fake", issuer="fake", principal_type="user", principal_id="fake:u2")

    posted = post_message(api.rt, boss, stranger, "approve")  # neither alice nor bob
    api.wait_idle()

    assert posted.results[0].status == "refused"
    assert ("fake:boss:", "fake:u2") in channel.refused_at  # type: ignore[attr-defined]
    assert api.client("bot:agent").get(f"/api/requests/{request['requestId']}").get_json()["status"] == "pending"


def test_an_escalations_approver_sees_the_request_with_any_key_of_their_person(api: Stack) -> None:
    """The escalation names bob's Slack account; his API key, linked to it, sees the request from then on."""
    with api.rt.transaction() as db:
        save_person(db, "bob", None, ["slack:T1:UBOB", "bob"])
    request = opened(api, approvers=["alice"], escalate={"after": 120, "to": BOSS, "approvers": ["slack:T1:UBOB"]})
    one = f"/api/requests/{request['requestId']}"
    assert api.client("bob").get(one).status_code == 404

    later(api, 121)
    assert sweep(api.rt).escalated == 1
    api.wait_idle()

    assert api.client("bob").get(one).status_code == 200
    listed = api.client("bob").get("/api/requests").get_json()["requests"]
    assert [r["requestId"] for r in listed] == [request["requestId"]]
    assert api.client("carol").get(one).status_code == 404
