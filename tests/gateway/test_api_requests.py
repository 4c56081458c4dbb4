"""POST /api/requests, GET /api/requests/<id>?wait=N and POST /api/requests/<id>/cancel: agents that run elsewhere
ask people through the REST API (SQLite + in-process jobs: nothing here depends on the stack)."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.asgi import FlaskOnAsgi
from gateway.settings import ConfigurationError, load_settings
from tests.conftest import KEYS, Stack, sqlite_settings
from tests.gateway.test_api import expect_error
from tests.gateway.test_asgi import Client
from tests.support.fake_channel import RecordingChannel

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
APPROVAL = {"kind": "tool-approval", "action": {"kind": "tool-call", "toolName": "refund_charge",
                                                "input": {"charge": "ch_1", "amount": 20}},
            "approvers": ["alice"], "metadata": {"ticket": 7}}
QUESTION = {"kind": "question", "prompt": "Which plan?", "allowFreeform": False,
            "options": [{"id": "basic", "label": "Basic"}, {"id": "pro", "label": "Pro", "description": "more"}]}


def api_stack(tmp_path: Path) -> Stack:
    """Callbacks signed with SECRET and allowed to hooks.test and 127.0.0.1; a `fake` channel whose places are
    `{room}`."""
    stack = Stack("sqlite", sqlite_settings(tmp_path, callback_secret=SECRET,
                                            callback_allowed_hosts="hooks.test,127.0.0.1,169.254.169.254"))
    stack.rt.channels["fake"] = RecordingChannel()
    return stack


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Stack]:
    stack = api_stack(tmp_path)
    yield stack
    stack.close()


@pytest.fixture(scope="module")
def refusing(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """One stack for every body that is refused: each test checks it stays empty."""
    stack = api_stack(tmp_path_factory.mktemp("refusing"))
    yield stack
    stack.close()


def nothing_stored(stack: Stack) -> None:
    operator = stack.client("bob:operator")  # who sees everything
    assert operator.get("/api/sessions").get_json()["sessions"] == []
    assert operator.get("/api/requests").get_json()["requests"] == []


def test_a_tool_approval_is_opened_201_with_its_session(api: Stack) -> None:
    response = api.client("bot:agent").post("/api/requests", json={**APPROVAL, "to": {"channel": "fake",
                                                                                 "address": {"room": "ops"}}})

    assert response.status_code == 201, response.get_data(as_text=True)
    request = response.get_json()
    assert (request["kind"], request["status"], request["turnId"], request["prompt"]) == (
        "tool-approval", "pending", None, "Approve refund_charge?")
    assert request["action"]["input"] == {"charge": "ch_1", "amount": 20}
    assert (request["approvers"], request["metadata"], request["callback"]) == (["alice"], {"ticket": 7}, None)
    session = api.client("bot:agent").get(f"/api/sessions/{request['sessionId']}").get_json()
    assert (session["channel"], session["address"], session["initiator"]["principalId"]) == ("fake", "fake:ops:",
                                                                                           "bot")
    api.wait_idle()
    assert [c[:2] for c in api.rt.channels["fake"].calls] == [("show", request["requestId"])]  # type: ignore[attr-defined]


def test_only_an_agents_or_an_operators_key_opens_a_request(api: Stack) -> None:
    error = expect_error(api.client("alice").post("/api/requests", json=APPROVAL), 403, "not_permitted")

    assert error["details"] == {"role": "user"}
    assert api.client("bob:operator").post("/api/requests", json=APPROVAL).status_code == 201
    assert api.client("bob:operator").get("/api/requests").get_json()["requests"][0]["requestedBy"]["principalId"] \
        == "bob"


def test_an_approver_sees_and_answers_it_and_other_users_do_not_see_it(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=APPROVAL).get_json()
    one = f"/api/requests/{request['requestId']}"

    assert api.client("carol").get("/api/requests").get_json()["requests"] == []
    expect_error(api.client("carol").patch(one, json={"optionId": "approve"}), 404, "not_found")
    assert [r["requestId"] for r in api.client("alice").get("/api/requests").get_json()["requests"]] == [
        request["requestId"]]
    expect_error(api.client("bot:agent").patch(one, json={"optionId": "approve"}), 403, "not_permitted")
    approved = api.client("alice").patch(one, json={"optionId": "approve"})

    assert approved.status_code == 200
    assert (approved.get_json()["outcome"], approved.get_json()["responder"]["principalId"]) == ("approved", "alice")
    assert api.client("bot:agent").get(one).get_json()["outcome"] == "approved"  # its agent sees it


def test_bob_as_an_operator_settles_what_he_is_not_named_for(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=APPROVAL).get_json()

    expect_error(api.client("bob").patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"}),
                 404, "not_found")
    settled = api.client("bob:operator").patch(f"/api/requests/{request['requestId']}", json={"optionId": "deny"})

    assert (settled.status_code, settled.get_json()["outcome"]) == (200, "denied")


@pytest.mark.parametrize(("change", "field"), [
    pytest.param({"kind": "approval"}, "kind", id="unknown-kind"),
    pytest.param({"action": None}, "action", id="approval-without-action"),
    pytest.param({"action": {"toolName": ""}}, "action.toolName", id="blank-tool-name"),
    pytest.param({"action": {"kind": "shell", "toolName": "x"}}, "action.kind", id="not-a-tool-call"),
    pytest.param({"options": QUESTION["options"]}, "options", id="approval-with-options"),
    pytest.param({"allowFreeform": True}, "allowFreeform", id="approval-with-freeform"),
    pytest.param({"kind": "question", "prompt": None, "action": None, "options": QUESTION["options"]}, "prompt",
                 id="question-without-prompt"),
    pytest.param({"kind": "question", "prompt": "?"}, "action", id="question-with-action"),
    pytest.param({"kind": "question", "prompt": "?", "action": None, "options": [{"label": "One"}]}, "options",
                 id="one-option"),
    pytest.param({"kind": "question", "prompt": "?", "action": None, "options": [{"label": str(n)}
                                                                                   for n in range(6)]},
                 "options", id="six-options"),
    pytest.param({"kind": "question", "prompt": "?", "action": None, "options": [{"label": "Pro"},
                                                                                   {"label": "pro"}]},
                 "options", id="same-label"),
    pytest.param({"kind": "question", "prompt": "?", "action": None,
                  "options": [{"id": "a", "label": "One"}, {"id": "A", "label": "Two"}]}, "options", id="same-id"),
    pytest.param({"kind": "question", "prompt": "?", "action": None, "options": ["Basic", "Pro"]}, "options.0",
                 id="options-as-strings"),
    pytest.param({"approvers": []}, "approvers", id="no-approvers"),
    pytest.param({"approvers": [""]}, "approvers.0", id="blank-approver"),
    pytest.param({"expiresIn": 0}, "expiresIn", id="expires-at-once"),
    pytest.param({"expiresIn": "soon"}, "expiresIn", id="expires-in-words"),
    pytest.param({"idempotencyKey": "k" * 201}, "idempotencyKey", id="long-key"),
    pytest.param({"metadata": {"x": "y" * 20_000}}, "metadata", id="big-metadata"),
    pytest.param({"to": {"channel": "fake"}}, "to.address", id="place-without-address"),
    pytest.param({"to": {"channel": "sms", "address": {"to": "+1"}}}, "to.channel", id="unknown-channel"),
    pytest.param({"to": {"channel": "fake", "address": {"street": "x"}}}, "to.address", id="bad-address"),
    pytest.param({"callbackUrl": "ftp://hooks.test/x"}, "callbackUrl", id="callback-not-http"),
    pytest.param({"callbackUrl": "https://evil.test/x"}, "callbackUrl", id="callback-host-not-allowed"),
    pytest.param({"callbackUrl": "http://169.254.169.254/latest/meta-data"}, "callbackUrl",
                 id="callback-to-cloud-metadata"),
    pytest.param({"surprise": 1}, "surprise", id="unknown-key"),
])
def test_a_body_that_does_not_fit_is_a_422_naming_the_field_and_stores_nothing(
        refusing: Stack, change: dict[str, Any], field: str) -> None:
    client = refusing.client("bot:agent")
    body = {key: value for key, value in {**APPROVAL, **change}.items() if value is not None}

    error = expect_error(client.post("/api/requests", json=body), 422, error_code(change, field))

    named = [d["field"] for d in error["details"]] if isinstance(error["details"], list) else [
        error["details"]["field"]]
    assert field in named, error
    nothing_stored(refusing)


def error_code(change: dict[str, Any], field: str) -> str:
    """A shape error is `invalid_request`; a place or a callback URL the gateway cannot use has its own code."""
    if field == "to.address" and "address" in change["to"]:
        return "invalid_address"
    return {"to.channel": "unknown_channel", "callbackUrl": "invalid_input"}.get(field, "invalid_request")


def test_a_callback_url_without_a_callback_secret_is_a_422(tmp_path: Path) -> None:
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    try:
        client = stack.client("bot:agent")
        error = expect_error(client.post("/api/requests", json={**APPROVAL, "callbackUrl": "https://hooks.test/x"}),
                             422, "invalid_input")
        assert error["details"] == {"field": "callbackUrl"} and "HITL_CALLBACK_SECRET" in error["message"]
        nothing_stored(stack)
    finally:
        stack.close()


def test_the_same_idempotency_key_answers_200_with_the_request_as_it_is_now(api: Stack) -> None:
    bot = api.client("bot:agent")
    keyed = {**QUESTION, "idempotencyKey": "plan-7"}
    first = bot.post("/api/requests", json=keyed)
    api.client("alice").patch(f"/api/requests/{first.get_json()['requestId']}", json={"optionId": "pro"})

    again = bot.post("/api/requests", json=keyed)
    other = bot.post("/api/requests", json={**keyed, "prompt": "Which plan, really?"})
    bobs = api.client("bob:operator").post("/api/requests", json=keyed)

    assert (first.status_code, again.status_code) == (201, 200)
    assert again.get_json()["requestId"] == first.get_json()["requestId"]
    assert (again.get_json()["outcome"], again.get_json()["response"]["optionId"]) == ("answered", "pro")
    error = expect_error(other, 409, "idempotency_conflict")
    assert error["details"]["requestId"] == first.get_json()["requestId"]
    assert bobs.status_code == 201 and bobs.get_json()["requestId"] != first.get_json()["requestId"]


def test_a_long_poll_answers_as_soon_as_the_request_closes(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()
    one = f"/api/requests/{request['requestId']}"
    answer = threading.Timer(0.5, lambda: api.client("alice").patch(one, json={"optionId": "basic"}))

    answer.start()
    started = time.monotonic()
    polled = api.client("bot:agent").get(one, query_string={"wait": 20})
    took = time.monotonic() - started
    answer.join()

    assert polled.status_code == 200
    assert (polled.get_json()["status"], polled.get_json()["outcome"]) == ("resolved", "answered")
    assert 0.4 < took < 5


def test_a_long_poll_of_a_request_still_pending_answers_after_wait_seconds(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()

    started = time.monotonic()
    polled = api.client("bot:agent").get(f"/api/requests/{request['requestId']}?wait=1")

    assert polled.status_code == 200 and polled.get_json()["status"] == "pending"
    assert 1 <= time.monotonic() - started < 3


@pytest.mark.parametrize("wait", ["61", "-1", "1.5", "soon"])
def test_a_wait_that_is_not_0_to_60_seconds_is_a_400(api: Stack, wait: str) -> None:
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()

    error = expect_error(api.client("bot:agent").get(f"/api/requests/{request['requestId']}?wait={wait}"), 400,
                         "invalid_query")

    assert error["details"] == {"parameter": "wait"}


def test_its_agent_cancels_it_and_nobody_else_may(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()
    cancel = f"/api/requests/{request['requestId']}/cancel"

    expect_error(api.client("carol").post(cancel), 403, "not_permitted")
    cancelled = api.client("bot:agent").post(cancel)
    expect_error(api.client("bot:agent").post(cancel), 409, "request_closed")

    assert cancelled.status_code == 200
    assert (cancelled.get_json()["outcome"], cancelled.get_json()["responder"]["principalId"]) == ("cancelled", "bot")
    expect_error(api.client("bot:agent").post("/api/requests/req_nope/cancel"), 404, "not_found")


def test_a_callback_secret_not_in_its_whsec_form_stops_start_up_without_showing_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HITL_CALLBACK_SECRET", "hunter2hunter2hunter2")

    with pytest.raises(ConfigurationError) as stopped:
        load_settings()

    assert "HITL_CALLBACK_SECRET" in str(stopped.value) and "whsec_" in str(stopped.value)
    assert "hunter2" not in str(stopped.value)


def test_a_request_of_the_console_without_approvers_is_every_users(api: Stack) -> None:
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()

    listed = api.client("carol").get("/api/requests?status=pending").get_json()["requests"]
    answered = api.client("carol").patch(f"/api/requests/{request['requestId']}", json={"optionId": "pro"})

    assert [r["requestId"] for r in listed] == [request["requestId"]]
    assert (answered.status_code, answered.get_json()["responder"]["principalId"]) == (200, "carol")


def test_long_polls_under_the_asgi_worker_hold_no_thread(api: Stack) -> None:
    """One pool thread: three long-polls wait on the event loop, /healthz is answered meanwhile, and each gets
    the request once it is answered."""
    request = api.client("bot:agent").post("/api/requests", json=QUESTION).get_json()
    app = FlaskOnAsgi(api.app, threads=1)
    bot = [(b"authorization", f"Bearer {KEYS['bot:agent']}".encode())]

    async def scenario() -> list[Client]:
        polls = [Client(app, "GET", f"/api/requests/{request['requestId']}", bot, query=b"wait=30") for _ in range(3)]
        await asyncio.sleep(0.5)
        health = Client(app, "GET", "/healthz")
        await asyncio.wait_for(health.task, 5)
        assert health.status == 200 and not any(poll.task.done() for poll in polls)
        await asyncio.to_thread(api.client("alice").patch, f"/api/requests/{request['requestId']}",
                                json={"optionId": "basic"})
        await asyncio.wait_for(asyncio.gather(*(poll.task for poll in polls)), 5)
        return polls

    for poll in asyncio.run(scenario()):
        assert poll.status == 200
        assert dict(poll.sent[0]["headers"])[b"content-type"] == b"application/json"
        assert json.loads(poll.body)["outcome"] == "answered"
