"""A response whose policy never finished (its process died while the policy ran) is judged by the sweep."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from engine import defaults
from engine.jobs.recovery import sweep
from engine.policies import ResponseContext
from tests.conftest import Stack
from tests.support.agent import read_ledger, script

Verdict = Callable[[ResponseContext], dict[str, str]]


def allowed(_: ResponseContext) -> dict[str, str]:
    return {"status": "allowed"}


class Dying:
    """The agent's response policy: its first call dies as a worker stopped mid-policy does (gunicorn's
    worker timeout and a deploy's SIGTERM raise SystemExit in it; a SIGKILL just stops it), after which
    `then` judges."""

    def __init__(self, then: Verdict) -> None:
        self.then = then
        self.calls: list[str] = []

    def __call__(self, ctx: ResponseContext) -> dict[str, str]:
        self.calls.append(ctx.response.responder.principal_id)
        if len(self.calls) == 1:
            raise SystemExit(1)
        return self.then(ctx)


@contextmanager
def later(stack: Stack, seconds: float) -> Iterator[None]:
    """This process's clock, `seconds` ahead (the worker process keeps the real one)."""
    real = stack.rt.clock
    stack.rt.clock = lambda: real() + timedelta(seconds=seconds)
    try:
        yield
    finally:
        stack.rt.clock = real


def overdue(stack: Stack) -> float:
    return stack.rt.response_policy_timeout + defaults.SWEEP_CANDIDATE_AFTER_SECONDS + 1


def left_pending(stack: Stack, monkeypatch: pytest.MonkeyPatch, policy: Any) -> tuple[str, str]:
    """bob approves alice's refund; the process judging his response dies: his candidate stays pending."""
    monkeypatch.setattr(stack.rt.agent, "response_policy", policy)
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_7", "amount": 7})]))
    [request] = stack.pending(sid)
    with pytest.raises(SystemExit):
        stack.answer(request["requestId"], "approve", who="bob", wait=False)
    assert candidates(stack, sid) == [("bob", "pending")]
    return sid, request["requestId"]


def candidates(stack: Stack, sid: str) -> list[tuple[str, str]]:
    return [(c["responder"]["principalId"], c["outcome"])
            for r in stack.turn(sid)["requests"] for c in r["candidates"]]


def refunds() -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def test_an_allowed_candidate_left_pending_settles_at_the_next_sweep(stack: Stack,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Dying(then=allowed)
    sid, _ = left_pending(stack, monkeypatch, policy)

    assert sweep(stack.rt).rejudged == 0  # a policy may still be running: a fresh candidate is left alone
    assert candidates(stack, sid) == [("bob", "pending")] and policy.calls == ["bob"]
    with later(stack, overdue(stack)):
        assert sweep(stack.rt).rejudged == 1
    stack.wait_idle()

    assert candidates(stack, sid) == [("bob", "allowed")] and policy.calls == ["bob", "bob"]
    assert stack.turn(sid)["status"] == "completed"
    [refund] = refunds()
    assert (refund["requester"], refund["responder"]) == ("alice", "bob")
    types = stack.event_types(sid)
    answer = types[types.index("approval.candidate"):]
    assert answer[:4] == ["approval.candidate", "approval.settled", "input.resolved", "turn.started"]
    with later(stack, 2 * overdue(stack)):
        assert sweep(stack.rt).rejudged == 0


def test_a_rejected_candidate_left_pending_is_refused_and_the_responder_told(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    sid, request_id = left_pending(stack, monkeypatch, Dying(then=lambda _: {
        "status": "rejected", "reason": "only carol may approve refunds"}))

    with later(stack, overdue(stack)):
        assert sweep(stack.rt).rejudged == 1
    stack.wait_idle()

    assert candidates(stack, sid) == [("bob", "rejected")]
    tail = [(e["type"], e["data"].get("outcome"), e["data"].get("reason")) for e in stack.events(sid)][-3:]
    assert tail == [("approval.candidate", "pending", None),
                    ("approval.candidate", "rejected", "only carol may approve refunds"), ("turn.waiting", None, None)]
    assert [r["requestId"] for r in stack.pending(sid)] == [request_id]
    assert stack.turn(sid)["status"] == "waiting" and refunds() == []


def test_a_candidate_left_pending_on_a_request_closed_meanwhile_is_stale(stack: Stack,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    policy = Dying(then=allowed)
    sid, request_id = left_pending(stack, monkeypatch, policy)
    assert stack.answer(request_id, "approve", who="alice").status == "settled"

    with later(stack, overdue(stack)):
        assert sweep(stack.rt).rejudged == 1
    stack.wait_idle()

    assert candidates(stack, sid) == [("bob", "stale"), ("alice", "allowed")]
    assert policy.calls == ["bob", "alice"]  # a closed request's candidate is not judged again
    [refund] = refunds()
    assert refund["responder"] == "alice"
    assert stack.event_types(sid).count("approval.settled") == 1


def test_a_candidate_left_pending_whose_responder_answered_again_is_stale_and_told_once(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """A channel re-sends an item whose job died mid-policy: the re-sent answer is judged; the first, left
    pending, must not refuse bob a second time."""
    policy = Dying(then=lambda _: {"status": "rejected", "reason": "only carol may approve refunds"})
    sid, request_id = left_pending(stack, monkeypatch, policy)
    assert stack.answer(request_id, "approve", who="bob").status == "refused"  # the re-sent click

    with later(stack, overdue(stack)):
        assert sweep(stack.rt).rejudged == 1
    stack.wait_idle()

    assert candidates(stack, sid) == [("bob", "stale"), ("bob", "rejected")]
    assert policy.calls == ["bob", "bob"]  # not judged a third time
    refusals = [e for e in stack.events(sid)
                if e["type"] == "approval.candidate" and e["data"]["outcome"] == "rejected"]
    assert len(refusals) == 1 and [r["requestId"] for r in stack.pending(sid)] == [request_id]


def test_two_sweeps_at_once_settle_a_candidate_left_pending_once(stack: Stack,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    both = threading.Barrier(2, timeout=5)

    def slow(_: ResponseContext) -> dict[str, str]:
        both.wait()  # both sweeps judge it: neither has settled it yet
        return {"status": "allowed"}

    sid, _ = left_pending(stack, monkeypatch, Dying(then=slow))
    counts: list[int] = []
    with later(stack, overdue(stack)):
        sweeps = [threading.Thread(target=lambda: counts.append(sweep(stack.rt).rejudged)) for _ in range(2)]
        for thread in sweeps:
            thread.start()
        for thread in sweeps:
            thread.join()
    stack.wait_idle()

    assert sorted(counts) == [0, 1]
    assert candidates(stack, sid) == [("bob", "allowed")]
    types = stack.event_types(sid)
    assert (types.count("approval.candidate"), types.count("approval.settled"), types.count("input.resolved")) \
        == (1, 1, 1)
    assert len(refunds()) == 1 and stack.turn(sid)["status"] == "completed"


def test_a_slow_policy_the_sweep_overtook_reports_the_sweeps_verdict(stack: Stack,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A sync policy may run past the sweep's wait: the verdict applied first stands, the slow one is dropped."""
    calls: list[int] = []

    def overtaken(_: ResponseContext) -> dict[str, str]:
        calls.append(len(calls))
        if len(calls) == 1:  # still running when the sweep judges the same candidate again
            with later(stack, overdue(stack)):
                assert sweep(stack.rt).rejudged == 1
            return {"status": "rejected", "reason": "too late to count"}
        return {"status": "allowed"}

    monkeypatch.setattr(stack.rt.agent, "response_policy", overtaken)
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_8", "amount": 8})]))
    [request] = stack.pending(sid)
    result = stack.answer(request["requestId"], "approve", who="bob")

    assert (result.status, result.reason) == ("settled", None)
    assert candidates(stack, sid) == [("bob", "allowed")]
    assert [e["data"]["outcome"] for e in stack.events(sid) if e["type"] == "approval.candidate"] \
        == ["pending"]
    assert len(refunds()) == 1 and stack.turn(sid)["status"] == "completed"
