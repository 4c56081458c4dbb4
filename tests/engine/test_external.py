"""External requests: made by an agent running elsewhere, settled through the same path as an agent's request,
closed without any turn to resume; on SQLite and on PostgreSQL with a real worker."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from engine.answers.conversation import post_message
from engine.answers.external import NewRequest, Place, cancel_external_request, open_external_request
from engine.answers.submit import submit_responses
from engine.errors import Conflict, IdempotencyConflict, NotPermitted, RequestClosed
from engine.jobs.recovery import sweep
from engine.protocol import InputResponse, Principal, api_key_principal, operator_principal
from engine.store.queries import get_request
from engine.store.tables import Outbox, Turn
from engine.turns.sessions import open_session
from tests.conftest import Stack, sqlite_settings
from tests.support.agent import read_ledger, script
from tests.support.fake_channel import RecordingChannel

BOT = api_key_principal("bot")
REFUND = NewRequest(kind="tool-approval", tool_name="refund_charge", tool_input={"charge": "ch_1", "amount": 20},
                    approvers=["carol", "fake:u1"], metadata={"ticket": 7})
PLAN = NewRequest(kind="question", prompt="Which plan?", allow_freeform=True,
                  options=[{"id": "basic", "label": "Basic"}, {"id": "pro", "label": "Pro", "description": "more"}])


def fake_person(user: str) -> Principal:
    return Principal(authenticator="fake", issuer="fake", principal_type="user", principal_id=f"fake:{user}")


def answer(stack: Stack, request_id: str, who: Principal, option: str | None = None, text: str | None = None) -> str:
    [result] = submit_responses(stack.rt, who, [InputResponse(request_id=request_id, option_id=option, text=text)])
    stack.wait_idle()
    return result.status


def test_an_approval_opens_in_a_session_of_its_own_with_no_turn(stack: Stack) -> None:
    opened = open_external_request(stack.rt, BOT, REFUND)
    request = opened.request

    assert opened.created
    assert request["turnId"] is None and request["status"] == "pending" and request["display"] == "confirmation"
    assert request["prompt"] == "Approve refund_charge?"
    assert request["action"]["toolName"] == "refund_charge" and request["action"]["callId"].startswith("call_")
    assert request["requestedBy"]["principalId"] == "bot"
    assert (request["approvers"], request["metadata"], request["callback"]) == (["carol", "fake:u1"], {"ticket": 7},
                                                                              None)
    history = stack.history(request["sessionId"])
    assert (history["channel"], history["initiator"]["principalId"], history["turns"]) == ("api", "bot", [])
    assert [r["requestId"] for r in history["requests"]] == [request["requestId"]]
    [event] = stack.events(request["sessionId"])
    assert (event["type"], event["turnId"], event["data"]["requests"][0]["requestId"]) == (
        "input.requested", None, request["requestId"])


def test_a_named_approver_settles_it_and_no_turn_runs(stack: Stack) -> None:
    request = open_external_request(stack.rt, BOT, REFUND).request
    rid, sid = request["requestId"], request["sessionId"]

    assert answer(stack, rid, api_key_principal("alice"), "approve") == "refused"
    assert answer(stack, rid, api_key_principal("carol"), "approve") == "settled"

    assert stack.event_types(sid) == ["input.requested", "approval.candidate", "approval.candidate",
                                      "approval.candidate", "approval.settled", "input.resolved"]
    refusal = stack.events(sid)[2]["data"]
    assert (refusal["outcome"], refusal["reason"]) == ("rejected", "only carol or fake:u1 may answer this request")
    settled = stack.history(sid)
    assert settled["status"] == "idle" and settled["turns"] == []
    assert (settled["requests"][0]["outcome"], settled["requests"][0]["responder"]["principalId"]) == ("approved",
                                                                                                      "carol")
    assert read_ledger() == []  # nothing ran here: the agent runs its tool itself
    with stack.rt.db.read() as db:
        assert db.execute(select(Turn)).first() is None


def test_without_approvers_anyone_its_place_admits_may_answer_and_operators(stack: Stack) -> None:
    on_api = open_external_request(stack.rt, BOT, PLAN).request
    other = open_external_request(stack.rt, BOT, PLAN).request

    assert answer(stack, on_api["requestId"], fake_person("u1"), "pro") == "refused"  # not of the console or API
    assert answer(stack, on_api["requestId"], api_key_principal("alice"), text="Pro, for a year") == "settled"
    assert answer(stack, other["requestId"], operator_principal("root"), "basic") == "settled"

    [first] = stack.history(on_api["sessionId"])["requests"]
    assert first["response"] == {"optionId": None, "text": "Pro, for a year"}
    assert first["candidates"][0]["reason"] == "this request is answered on the console or the API"
    assert get_request(stack.rt, other["requestId"])["response"] == {"optionId": "basic", "text": None}


def test_the_same_idempotency_key_finds_the_same_request_and_another_body_is_a_conflict(stack: Stack) -> None:
    keyed = NewRequest(**{**REFUND.__dict__, "idempotency_key": "refund-ch_1"})
    first = open_external_request(stack.rt, BOT, keyed)
    answer(stack, first.request["requestId"], api_key_principal("carol"), "cancel", text="not today")

    again = open_external_request(stack.rt, BOT, keyed)
    assert not again.created and again.request["requestId"] == first.request["requestId"]
    assert again.request["outcome"] == "denied"  # its state now
    with pytest.raises(IdempotencyConflict) as conflict:
        open_external_request(stack.rt, BOT, NewRequest(**{**keyed.__dict__, "tool_input": {"charge": "ch_2"}}))
    assert conflict.value.details["requestId"] == first.request["requestId"]
    other_agent = open_external_request(stack.rt, api_key_principal("bot2"), keyed)
    assert other_agent.created and other_agent.request["requestId"] != first.request["requestId"]


def test_an_overdue_request_expires_by_the_sweep_and_owes_its_callback(stack: Stack) -> None:
    stack.rt.callback_key = b"k" * 32
    real_clock = stack.rt.clock
    stack.rt.clock = lambda: real_clock() - timedelta(seconds=61)  # asked a minute and a second ago
    try:
        request = open_external_request(stack.rt, BOT, NewRequest(
            **{**PLAN.__dict__, "expires_in": 60, "callback_url": "http://127.0.0.1:9/hook"})).request
    finally:
        stack.rt.clock = real_clock
    assert request["callback"] == {"status": "waiting", "attempts": 0, "lastError": None, "nextAttemptAt": None}

    sweep(stack.rt)  # (on PostgreSQL the worker sweeps every second too: one of them closes it)
    stack.wait_idle()

    closed = get_request(stack.rt, request["requestId"])
    assert (closed["status"], closed["outcome"]) == ("resolved", "expired")
    assert stack.event_types(request["sessionId"]).count("input.resolved") == 1
    assert (closed["callback"]["status"], closed["callback"]["attempts"] >= 1) == ("retrying", True)
    # (nobody listens on port 9: tried, and due again after its backoff, which a slow machine may already have
    # reached)


@pytest.fixture
def place(tmp_path: Path) -> Iterator[tuple[Stack, RecordingChannel]]:
    """SQLite, and a text channel that shows one request at a time."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    channel = RecordingChannel(one_at_a_time=True)
    stack.rt.channels["fake"] = channel
    yield stack, channel
    stack.close()


def test_at_a_place_it_waits_its_turn_with_the_agents_requests_and_a_typed_reply_answers_it(
        place: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = place
    refund = script([("refund", {"charge_id": "a", "amount": 1})])
    sid = open_session(stack.rt, fake_person("u1"), channel="fake", address="fake:room:1", message=refund).session_id
    stack.wait_idle()
    [agents] = stack.pending(sid)
    external = open_external_request(stack.rt, BOT, NewRequest(**{**REFUND.__dict__,
                                                                   "place": Place("fake", "fake:room:1")})).request
    stack.wait_idle()
    assert external["sessionId"] == sid  # the place's session
    assert [c for c in channel.calls if c[0] == "show"] == [("show", agents["requestId"], 1, 1)]

    post_message(stack.rt, sid, fake_person("u1"), "approve")  # the agent's refund, shown first, is answered
    stack.wait_idle()
    shown = [c for c in channel.calls if c[0] == "show"]
    assert shown == [("show", agents["requestId"], 1, 1), ("show", external["requestId"], 1, 1)]

    post_message(stack.rt, sid, fake_person("u2"), "approve")  # not an approver: told so, still open
    stack.wait_idle()
    refusal = ("refuse", external["requestId"], "fake:u2", "only carol or fake:u1 may answer this request")
    assert refusal in channel.calls
    posted = post_message(stack.rt, sid, fake_person("u1"), "approve")
    stack.wait_idle()

    assert (posted.effect, posted.results[0].status) == ("answered", "settled")
    assert stack.pending(sid) == []
    assert [t["seq"] for t in stack.history(sid)["turns"]] == [1]  # no turn started by the answers
    assert [c[:3] for c in channel.calls if c[0] == "update"] == [("update", agents["requestId"], "approved"),
                                                                 ("update", external["requestId"], "approved")]


def test_a_steer_leaves_an_external_request_open(place: tuple[Stack, RecordingChannel]) -> None:
    stack, _ = place
    sid = open_session(stack.rt, fake_person("u1"), channel="fake", address="fake:room:1").session_id
    external = open_external_request(stack.rt, BOT, NewRequest(**{**REFUND.__dict__,
                                                                   "place": Place("fake", "fake:room:1")})).request
    post_message(stack.rt, sid, fake_person("u1"), script([("refund", {"charge_id": "a", "amount": 1})]))
    stack.wait_idle()
    agents = [r for r in stack.pending(sid) if r["turnId"]]

    steered = post_message(stack.rt, sid, fake_person("u1"), "forget the refund")
    stack.wait_idle()

    assert steered.effect == "steered"
    assert [r["requestId"] for r in stack.pending(sid)] == [external["requestId"]]
    assert agents and stack.history(sid)["turns"][0]["requests"][0]["outcome"] == "ignored"


def test_only_its_agent_or_an_operator_cancels_it(stack: Stack) -> None:
    request = open_external_request(stack.rt, BOT, PLAN).request
    rid = request["requestId"]

    with pytest.raises(NotPermitted):
        cancel_external_request(stack.rt, rid, api_key_principal("alice"))
    cancelled = cancel_external_request(stack.rt, rid, BOT)
    assert (cancelled["status"], cancelled["outcome"]) == ("resolved", "cancelled")
    with pytest.raises(RequestClosed):
        cancel_external_request(stack.rt, rid, operator_principal("root"))
    sid, _ = stack.start(script([("refund", {"charge_id": "a", "amount": 1})]))
    [agents] = stack.pending(sid)
    with pytest.raises(Conflict):
        cancel_external_request(stack.rt, agents["requestId"], operator_principal("root"))
    with stack.rt.db.read() as db:
        assert db.execute(select(Outbox.job).where(Outbox.job == "run_turn")).first() is None
