"""Redis unreachable while 50 answers arrive (25 through the REST API, 25 as Slack button clicks), then back: no
answer is lost, and every turn resumes within two sweeps.

The gateway's Redis is a `redis-server` of the test's own, stopped for the outage and started again empty (as a
Redis without persistence restarts: every queued job is gone). The worker keeps running and reconnects on its own.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.store.tables import Inbound, InputRequest, Turn
from tests.reliability.conftest import Deployment, deployment
from tests.slack.workspace import Workspace
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import BOT_USER
from tests.support.services import RedisServer

ANSWERS = 50
REFUND = script([("refund", {"charge_id": "ch_outage", "amount": 3})], final="refunded")
OUTBOX_WAIT = 31
"""Seconds: a sweep pushes an outbox row again 30 s after its push (engine.defaults.SWEEP_OUTBOX_AFTER_SECONDS)."""


@pytest.fixture
def outage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Deployment, RedisServer]]:
    redis = RedisServer(tmp_path).start()
    try:
        with deployment(request, tmp_path, redis.url) as built:
            built.start_worker()
            yield built, redis
    finally:
        redis.stop()


@pytest.mark.slow
def test_fifty_answers_while_redis_is_down_are_all_applied_within_two_sweeps(
        outage: tuple[Deployment, RedisServer]) -> None:
    deployed, redis = outage
    stack, slack = deployed.stack, Workspace(deployed.stack, deployed.slack)
    api = stack.client("alice")
    by_api = [api.post("/api/sessions", json={"message": REFUND}).get_json()["id"] for _ in range(ANSWERS // 2)]
    mentions = [slack.event("app_mention", "alice", f"<@{BOT_USER}> {REFUND}") for _ in range(ANSWERS - len(by_api))]
    for mention in mentions:
        assert slack.send_event(mention).status_code == 200
    stack.wait_idle()
    requests = [stack.pending(sid)[0]["requestId"] for sid in by_api]
    cards = [slack.cards(m["event"])[-1] for m in mentions]

    redis.stop()
    answered = [api.patch(f"/api/requests/{rid}", json={"optionId": "approve"}).status_code for rid in requests]
    clicked = [slack.click("alice", card, "Approve").status_code for card in cards]

    assert answered == [200] * len(requests)  # settled, although the turns cannot be queued
    assert clicked == [200] * len(cards)  # stored, although no job can apply them
    with stack.rt.db.read() as db:
        assert db.query(InputRequest).filter_by(outcome="approved").count() == len(requests)
        assert db.query(Inbound).filter(Inbound.processed_at.is_(None), Inbound.item.is_not(None)).count() \
            == len(cards)
    assert read_ledger() == []

    redis.start()
    for _ in range(2):
        deployed.later(OUTBOX_WAIT)
        sweep(stack.rt)
        if completed_within(stack.rt, 20):  # (the worker reconnects on its own, within its backoff: 1, 2, 4 s...)
            break
    else:
        raise AssertionError(f"turns not resumed after two sweeps: {unfinished(stack.rt)}")
    stack.wait_idle()

    refunds = [e for e in read_ledger() if e["tool"] == "refund"]
    assert len(refunds) == ANSWERS
    assert len({e["callId"] for e in refunds}) == ANSWERS
    assert [len(slack.cards(m["event"])) for m in mentions] == [1] * len(mentions)
    assert [len([p for p in slack.thread(m["event"]) if "refunded" in (p.now["text"] or "")]) for m in mentions] \
        == [1] * len(mentions)


def completed_within(rt: Runtime, seconds: float) -> bool:
    """Whether every turn completes within `seconds`."""
    deadline = time.monotonic() + seconds
    while unfinished(rt):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def unfinished(rt: Runtime) -> list[tuple[str, str]]:
    with rt.db.read() as db:
        return [(t.id, t.status) for t in db.query(Turn).filter(Turn.status != "completed")]
