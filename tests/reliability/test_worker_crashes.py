"""A `hitl worker` SIGKILLed at twenty points of twenty approval cycles on Slack loses no turn and never runs an
approved tool twice on one approval (DESIGN.md rule 12: a call found running after its worker died needs a fresh
approval).

Each cycle: alice mentions the bot with a script that calls `slow_refund` (approval-gated, not idempotent), the
approval card is posted, she presses Approve; the tool runs, the card is updated, the answer is posted. One point
of the cycle is armed (tests/support/faults.py); the worker that reaches it stops there and is SIGKILLed. Then, as
in production: its leases run out, a sweep recovers what it held, and a new worker goes on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from engine.jobs.recovery import sweep
from tests.reliability.conftest import Deployment
from tests.slack.workspace import Workspace
from tests.support.agent import read_ledger, script, wait_for
from tests.support.fake_slack import BOT_USER, Message
from tests.support.faults import arm, reached

ANSWER = "refunded"
REFUND = script([("slow_refund", {"seconds": 0})], final=ANSWER)
FRESH = "An earlier attempt was interrupted and may have partly run."
POSTS: dict[str, Callable[[dict[str, Any]], bool]] = {
    "card": lambda params: bool(params.get("blocks")),
    "answer": lambda params: ANSWER in (params.get("text") or ""),
}
"""Which chat.postMessage is which (the first run also says "step 1" before its card)."""


@dataclass(frozen=True)
class Point:
    name: str
    """The fault point (tests/support/faults.py; `slack:<method>`: the fake Slack took the call, and holds it)."""
    what: str
    post: str | None = None
    """For `slack:chat.postMessage`: the post held, a `card` or the `answer`."""
    fresh: bool = False
    """The tool's call was running when the worker died: the turn asks for a fresh approval."""
    ran: int = 1
    """How many times the tool had run when the cycle ended."""
    cards: int = 1
    """Approval cards posted in the thread: a fresh approval has a card of its own, and a card is posted twice
    when the worker dies after posting it and before recording that it did (a delivery posts again at most the
    one post it was making)."""
    answers: int = 1
    """How many times the answer is posted (none yet where a fresh approval waits; twice, as a card can be)."""
    before_click: bool = False
    """Armed before the mention, else before the click."""


POINTS = [
    Point("commit:turn-waiting", "the first run parks on the approval", before_click=True),
    Point("slack:chat.postMessage", "the approval card is posted", "card", cards=2, before_click=True),
    Point("sql:inbound-applied", "the click is marked applied"),
    Point("sql:settle", "the request settles (compare-and-set)"),
    Point("commit:settle", "the settle commits"),
    Point("committed:settle", "the settle has committed"),
    Point("sql:claim", "the resumed run claims the turn"),
    Point("commit:call-running", "the call's running mark commits"),
    Point("committed:call-running", "the call is marked running", fresh=True, ran=0, cards=2, answers=0),
    Point("tool:slow_refund", "the tool runs", fresh=True, cards=2, answers=0),
    Point("sql:call-completed", "the tool's result is written", fresh=True, cards=2, answers=0),
    Point("commit:call-completed", "the tool's result commits", fresh=True, cards=2, answers=0),
    Point("committed:call-completed", "the tool's result has committed"),
    Point("sql:turn-completed", "the turn completes"),
    Point("commit:turn-completed", "the completion commits"),
    Point("committed:turn-completed", "the completion has committed"),
    Point("slack:chat.update", "the card is updated"),
    Point("slack:chat.postMessage", "the answer is posted", "answer", answers=2),
    Point("commit:delivered", "the delivery records its posts", answers=2),
    Point("committed:delivered", "the delivery has recorded its posts"),
]


class Cycles:
    """Alice's approval cycles on Slack, with one worker at a time, each killed at a point."""

    def __init__(self, deployed: Deployment) -> None:
        self.deployed = deployed
        self.slack = Workspace(deployed.stack, deployed.slack)
        self.worker = deployed.workers[-1]
        self.events: list[dict[str, Any]] = []
        """The mention that started each cycle."""

    def arm(self, point: Point) -> int:
        """Arm `point`; returns where the ledger stood (see faults.reached)."""
        if point.name.startswith("slack:"):
            self.deployed.slack.hold(point.name.removeprefix("slack:"), POSTS.get(point.post or "", lambda _: True))
            return len(read_ledger())
        return arm(self.deployed.faults, point.name)

    def crash(self, point: str, since: int) -> None:
        """Wait for the worker to reach `point`, SIGKILL it there, let its leases run out, sweep, start another."""
        wait_for(lambda: reached(point, since), timeout=30,
                 what=f"a worker to reach {point}:\n{self.worker.tail()}")
        self.worker.kill(9)
        self.deployed.slack.release()
        self.deployed.later(120)
        sweep(self.deployed.stack.rt)
        self.worker = self.deployed.start_worker()
        self.deployed.stack.wait_idle()

    def run(self, point: Point) -> dict[str, Any]:
        """One cycle, killed at `point`; returns the mention that started it."""
        if point.before_click:
            self.crash_during(point, self.mention)
            event = self.events[-1]
            self.approve(event)
            self.slack.wait_idle()
        else:
            self.mention()
            self.slack.wait_idle()
            event = self.events[-1]
            self.crash_during(point, lambda: self.approve(event))
        return event

    def crash_during(self, point: Point, act: Callable[[], None]) -> None:
        since = self.arm(point)
        act()
        self.crash(point.name, since)

    def mention(self) -> None:
        mention = self.slack.event("app_mention", "alice", f"<@{BOT_USER}> {REFUND}")
        assert self.slack.send_event(mention).status_code == 200
        self.events.append(dict(mention["event"]))

    def approve(self, event: dict[str, Any]) -> None:
        assert self.slack.click("alice", self.open_card(event), "Approve").status_code == 200

    def open_card(self, event: dict[str, Any]) -> Message:
        cards = [c for c in self.slack.cards(event) if any(b["type"] == "actions" for b in c.now["blocks"])]
        assert cards, f"no open card in the thread: {self.slack.thread(event)}"
        return cards[-1]

    def outcome(self, event: dict[str, Any]) -> tuple[str, int, int, int]:
        """The turn's status (`fresh`: waiting on a fresh approval), how many times the tool ran, and how many
        cards and answers were posted in the thread."""
        stack = self.deployed.stack
        sid = self.slack.session_of(event)
        turn = stack.turn(sid)
        status = turn["status"]
        if status == "waiting":
            prompts = [p["prompt"] for p in stack.pending(sid)]
            status = "fresh" if len(prompts) == 1 and FRESH in prompts[0] else f"waiting on {prompts}"
        return status, len(self.runs(turn)), len(self.slack.cards(event)), len(self.answers(event))

    def runs(self, turn: dict[str, Any]) -> list[dict[str, Any]]:
        calls = {c["callId"] for c in turn["toolCalls"]}
        return [e for e in read_ledger()
                if e["tool"] == "slow_refund" and e["phase"] == "start" and e["callId"] in calls]

    def answers(self, event: dict[str, Any]) -> list[Message]:
        return [m for m in self.slack.thread(event) if ANSWER in (m.now["text"] or "")]


@pytest.mark.slow
def test_a_worker_killed_at_twenty_points_loses_no_turn_and_runs_no_approved_tool_twice(
        deployed: Deployment) -> None:
    cycles = Cycles(deployed)

    events = [cycles.run(point) for point in POINTS]

    outcomes = {(p.name, p.what): cycles.outcome(event) for p, event in zip(POINTS, events, strict=True)}
    assert outcomes == {(p.name, p.what): ("fresh" if p.fresh else "completed", p.ran, p.cards, p.answers)
                        for p in POINTS}

    # alice approves again where she is asked to: each of those tools runs once more, knowing it may have run
    fresh = [event for p, event in zip(POINTS, events, strict=True) if p.fresh]
    for event in fresh:
        cycles.approve(event)
    deployed.stack.wait_idle()
    for event in fresh:
        turn = deployed.stack.turn(cycles.slack.session_of(event))
        assert turn["status"] == "completed"
        assert cycles.runs(turn)[-1]["again"] is True
    assert [cycles.outcome(event) for event in fresh] == [("completed", p.ran + 1, 2, 1) for p in POINTS if p.fresh]
