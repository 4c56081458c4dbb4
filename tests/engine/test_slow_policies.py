"""A request policy that takes its time (an auto() reviewer, the application's code) holds no lock while it
works: the gateway's other writes go on, and a turn cancelled meanwhile ends cancelled with nothing run."""

from __future__ import annotations

import time

from tests.conftest import Stack
from tests.support.agent import judging, read_ledger, release, script, wait_for

QUICK = 5.0
"""Seconds another write may take while a policy works: generous, far below a held policy's 10 s."""


def opened(stack: Stack, message: str) -> str:
    """A session started through the API; its turn runs in the background."""
    created = stack.client("alice").post("/api/sessions", json={"message": message})
    assert created.status_code == 201
    return str(created.get_json()["id"])


def timed(write: object) -> float:
    began = time.monotonic()
    assert callable(write)
    write()
    return time.monotonic() - began


def test_other_sessions_are_started_and_answered_while_a_reviewer_works(stack: Stack) -> None:
    other, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(other)
    sid = opened(stack, script([("reviewed", {"verdict": "held-clear"})]))
    wait_for(judging, what="the reviewer to start")
    client = stack.client("alice")

    def start() -> None:
        assert client.post("/api/sessions", json={"message": "hello"}).status_code == 201

    def answer() -> None:
        response = client.post(f"/api/sessions/{other}/input", json={
            "inputResponses": [{"requestId": request["requestId"], "optionId": "approve"}]})
        assert response.status_code == 202
        assert [r["status"] for r in response.get_json()["results"]] == ["settled"]

    took = [timed(start), timed(answer)]
    release()
    stack.wait_idle()

    assert max(took) < QUICK, took
    [call] = [e for e in read_ledger() if e["tool"] == "reviewed"]
    assert call["note"] == "reviewer says clear"
    assert stack.turn(sid)["status"] == "completed"
    assert stack.event_types(sid) == [
        "message.received", "turn.started", "assistant.message", "action.called", "action.result",
        "assistant.message", "turn.completed", "session.waiting",
    ]
    assert stack.turn(other)["status"] == "completed"


def test_a_turn_cancelled_while_its_policy_works_ends_cancelled_and_runs_nothing(stack: Stack) -> None:
    sid = opened(stack, script([("custom", {"form": "held-approved"})]))
    wait_for(judging, what="the policy to start")

    def cancel() -> None:
        assert stack.client("alice").post(f"/api/sessions/{sid}/cancel").status_code == 202

    took = timed(cancel)
    release()
    stack.wait_idle()

    assert took < QUICK
    assert not [e for e in read_ledger() if e["tool"] == "custom"]
    turn = stack.turn(sid)
    assert turn["status"] == "cancelled"
    assert turn["toolCalls"] == []
    assert stack.event_types(sid) == ["message.received", "turn.started", "turn.cancelled", "session.waiting"]


def test_once_judged_beside_a_reviewer_reads_the_sessions_grants(stack: Stack) -> None:
    """A step with a reviewed call is judged before its transaction, once() too: the grant still counts."""
    sid, _ = stack.start(script(
        [("deploy", {"env": "staging"}), ("reviewed", {"verdict": "clear"})],
        [("deploy", {"env": "canary"}), ("reviewed", {"verdict": "clear"})],
    ))
    [request] = stack.pending(sid)
    assert request["action"]["input"] == {"env": "staging"}
    assert [e["tool"] for e in read_ledger()] == ["reviewed"]  # it ran while the deploy waits

    stack.answer(request["requestId"], "approve")

    assert [e.get("env") for e in read_ledger() if e["tool"] == "deploy"] == ["staging", "canary"]
    assert len([e for e in read_ledger() if e["tool"] == "reviewed"]) == 2
    assert stack.turn(sid)["status"] == "completed"
    assert len(stack.history(sid)["turns"][0]["requests"]) == 1
