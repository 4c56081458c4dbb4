"""The runner's own failures: a turn whose step breaks fails with the error, it never stays queued or spins."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from engine.jobs.runtime import Runtime
from engine.store.queries import events_after
from engine.turns import runner
from engine.turns.sessions import open_session
from tests.conftest import Stack, sqlite_settings
from tests.support.agent import read_ledger, script


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Stack]:
    """SQLite and in-process jobs: the monkeypatched runner is the one that runs the turns."""
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def event_types(stack: Stack, session_id: str) -> list[str]:
    return [e["type"] for e in events_after(stack.rt, session_id)]


def test_a_first_step_that_breaks_fails_the_turn_it_claimed(local: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*_: Any) -> Any:
        raise RuntimeError("transcript unreadable")

    monkeypatch.setattr(runner, "load_messages", broken)  # breaks inside the claim's transaction

    sid, _ = local.start(script([("lookup", {"order_id": "o-1"})]))

    turn = local.turn(sid)
    assert turn["status"] == "failed"
    assert turn["error"] == {"code": "TURN_ERROR", "message": "RuntimeError: transcript unreadable"}
    assert event_types(local, sid) == ["message.received", "turn.started", "turn.failed", "session.waiting"]


def test_a_later_step_that_breaks_keeps_what_the_turn_did(local: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    real = runner.load_messages
    reads = {"n": 0}

    def second_read_breaks(*args: Any) -> Any:
        reads["n"] += 1
        if reads["n"] == 2:
            raise RuntimeError("transcript unreadable")
        return real(*args)

    monkeypatch.setattr(runner, "load_messages", second_read_breaks)

    sid, _ = local.start(script([("lookup", {"order_id": "o-2"})]))

    turn = local.turn(sid)
    assert turn["status"] == "failed"
    assert [c["status"] for c in turn["toolCalls"]] == ["completed"]  # the tool's result was committed first
    assert event_types(local, sid)[-3:] == ["action.result", "turn.failed", "session.waiting"]


def test_a_tool_result_json_cannot_hold_is_a_tool_error_the_model_reads(stack: Stack) -> None:
    sid, _ = stack.start(script([("average", {"values": []})], final="read"))

    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    [call] = turn["toolCalls"]
    assert call["status"] == "failed"
    error = json.loads(next(m["content"] for m in turn["messages"] if m["role"] == "tool"))["error"]
    assert error["code"] == "TOOL_ERROR"
    assert error["message"] == ("average ran, but its result cannot be stored as JSON: ValueError: Out of range "
                                "float values are not JSON compliant")
    assert [e["tool"] for e in read_ledger()] == ["average"]  # it ran once: the model is told so


def test_an_argument_the_tool_does_not_take_is_invalid_input_not_an_approval_of_what_will_not_happen(
        local: Stack) -> None:
    # refund has no currency: asking a person to approve "5 EUR" for a tool that refunds 5 of the charge's
    # currency would show them an input the call does not run with
    sid, _ = local.start(script([("refund", {"charge_id": "ch_1", "amount": 5, "currency": "eur"})], final="read"))

    turn = local.turn(sid)
    assert turn["status"] == "completed" and local.pending(sid) == []
    error = json.loads(next(m["content"] for m in turn["messages"] if m["role"] == "tool"))["error"]
    assert error == {"code": "INVALID_INPUT",
                     "message": "invalid input for refund: currency: Extra inputs are not permitted"}
    assert read_ledger() == []


class Dropped:
    """An executor that loses every job: the turn stays queued until a test runs it."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        pass

    def waiting_since(self) -> datetime | None:
        return None


def test_a_turn_runs_only_with_the_agent_its_session_records(local: Stack, caplog: pytest.LogCaptureFixture) -> None:
    """A process whose HITL_AGENT differs (a shell without it, a worker set up apart) leaves the turn to one that
    has the session's agent, instead of running it with tools and policies that are not the session's."""
    elsewhere = Runtime(local.rt.db, local.rt.agent, Dropped(), agent_spec="elsewhere.agents:agent")
    opened = open_session(elsewhere, None, message=script([("lookup", {"order_id": "o-1"})]))
    assert opened.turn_id is not None and local.history(opened.session_id)["agent"] == "elsewhere.agents:agent"

    runner.run_turn(local.rt, opened.turn_id)  # HITL_AGENT=tests.support.agent:agent

    assert local.turn(opened.session_id)["status"] == "queued" and read_ledger() == []
    assert (f"turn {opened.turn_id}: its session runs agent elsewhere.agents:agent and this process "
            "tests.support.agent:agent: left queued") in caplog.text

    runner.run_turn(elsewhere, opened.turn_id)

    assert local.turn(opened.session_id)["status"] == "completed"
    assert [e["order_id"] for e in read_ledger() if e["tool"] == "lookup"] == ["o-1"]
