"""`GET /metrics` after real flows, on SQLite + in-process jobs and on PostgreSQL + a real RQ worker."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
from sqlalchemy import select, update

from engine.channels.inbound import accept
from engine.jobs.recovery import recover_turn
from engine.store.retention import prune
from engine.store.tables import Inbound, Turn
from tests.conftest import Stack
from tests.support.agent import script

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])
BROKEN_MODEL = json.dumps({"steps": [[{"name": "lookup"}]]})  # a step without input: the test model raises


def scrape(stack: Stack) -> dict[str, float]:
    """Every sample of one scrape, keyed by `name{labels}`."""
    response = stack.client("bob:operator").get("/metrics")
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.content_type == "text/plain; version=0.0.4; charset=utf-8"
    samples = {}
    for line in response.get_data(as_text=True).splitlines():
        if line and not line.startswith("#"):
            series, value = line.rsplit(" ", 1)
            samples[series] = float(value)
    return samples


def decision_buckets(samples: dict[str, float], kind: str) -> dict[str, float]:
    prefix = f'hitl_input_request_decision_seconds_bucket{{kind="{kind}",le="'
    return {key.removeprefix(prefix)[:-2]: value for key, value in samples.items() if key.startswith(prefix)}


def test_a_refund_approved_after_90_seconds(stack: Stack) -> None:
    sid, _ = stack.start(REFUND)
    [request] = stack.pending(sid)
    asked = datetime.fromisoformat(request["createdAt"])
    stack.rt.clock = lambda: asked + timedelta(seconds=90)  # this process's clock: the scrape and the answer

    waiting = scrape(stack)

    assert waiting['hitl_input_requests_total{kind="tool-approval",status="pending",outcome=""}'] == 1
    assert waiting['hitl_input_requests_pending{kind="tool-approval"}'] == 1
    assert waiting['hitl_input_requests_pending{kind="question"}'] == 0
    assert waiting["hitl_input_request_oldest_pending_age_seconds"] == 90
    assert waiting['hitl_turns{status="waiting"}'] == 1
    assert waiting['hitl_input_request_decision_seconds_count{kind="tool-approval"}'] == 0

    stack.answer(request["requestId"], "approve")
    settled = scrape(stack)

    assert settled['hitl_input_requests_total{kind="tool-approval",status="resolved",outcome="approved"}'] == 1
    assert not any(key.startswith("hitl_input_requests_total") and 'status="pending"' in key for key in settled)
    assert settled['hitl_input_requests_pending{kind="tool-approval"}'] == 0
    assert settled["hitl_input_request_oldest_pending_age_seconds"] == 0
    assert decision_buckets(settled, "tool-approval") == {
        "1": 0, "5": 0, "15": 0, "60": 0, "300": 1, "900": 1, "3600": 1, "+Inf": 1}
    assert settled['hitl_input_request_decision_seconds_sum{kind="tool-approval"}'] == pytest.approx(90, abs=0.01)
    assert settled['hitl_input_request_decision_seconds_count{kind="tool-approval"}'] == 1
    assert settled['hitl_turns{status="completed"}'] == 1
    assert settled['hitl_turns{status="waiting"}'] == 0
    assert settled['hitl_job_failures_total{reason="turn_failed"}'] == 0


def test_failed_turns_and_runs_of_lost_workers_are_job_failures(stack: Stack) -> None:
    stack.start(BROKEN_MODEL)
    sid, turn_id = stack.start(REFUND)
    with stack.rt.transaction() as db:  # the worker running the turn died: its lease ran out
        db.execute(update(Turn).where(Turn.id == turn_id)
                   .values(status="running", lease_until=stack.rt.now() - timedelta(seconds=1)))
    assert recover_turn(stack.rt, turn_id) == 1
    stack.wait_idle()

    samples = scrape(stack)

    assert samples['hitl_job_failures_total{reason="turn_failed"}'] == 1
    assert samples['hitl_job_failures_total{reason="run_crashed"}'] == 1
    assert samples['hitl_turns{status="failed"}'] == 1
    assert samples['hitl_turns{status="waiting"}'] == 1  # the recovered turn asked for its approval again
    assert samples['hitl_input_requests_pending{kind="tool-approval"}'] == 1


def test_webhook_deliveries_and_duplicates_come_from_the_database(stack: Stack) -> None:
    for channel, external_id in [("slack", "Ev1"), ("slack", "Ev2"), ("twilio", "SM1"), ("slack", "Ev1")]:
        accept(stack.rt, channel, external_id, None, b"{}", None)

    samples = scrape(stack)

    assert samples['hitl_webhook_deliveries_total{channel="slack"}'] == 2
    assert samples['hitl_webhook_deliveries_total{channel="twilio"}'] == 1
    assert samples['hitl_webhook_duplicates_total{channel="slack"}'] == 1
    assert samples['hitl_webhook_duplicates_total{channel="twilio"}'] == 0


def test_pruned_deliveries_still_count(stack: Stack) -> None:
    """sweep() prunes deliveries older than the retention; the counters keep them (a counter that went down
    would read as a reset, and rate() as a burst of every delivery ever counted)."""
    for channel, external_id in [("slack", "Ev1"), ("slack", "Ev1"), ("twilio", "SM1")]:
        accept(stack.rt, channel, external_id, None, b"{}", None)
    with stack.rt.db.write() as db:
        db.execute(update(Inbound).values(received_at=stack.rt.now() - timedelta(days=31)))
    accept(stack.rt, "slack", "Ev2", None, b"{}", None)

    prune(stack.rt)  # unless the worker's own sweep pruned them first (on PostgreSQL it sweeps every second)
    with stack.rt.db.read() as db:
        assert db.execute(select(Inbound.external_id)).scalars().all() == ["Ev2"]
    samples = scrape(stack)

    assert samples['hitl_webhook_deliveries_total{channel="slack"}'] == 2
    assert samples['hitl_webhook_deliveries_total{channel="twilio"}'] == 1
    assert samples['hitl_webhook_duplicates_total{channel="slack"}'] == 1
    assert samples['hitl_webhook_duplicates_total{channel="twilio"}'] == 0


def test_metrics_are_prometheus_text_behind_an_operators_api_key(stack: Stack) -> None:
    assert stack.client(None).get("/metrics").status_code == 401

    text = stack.client("bob:operator").get("/metrics").get_data(as_text=True)

    lines = text.splitlines()
    for family in ("hitl_input_requests_total", "hitl_input_request_decision_seconds", "hitl_turns"):
        help_at = lines.index(next(line for line in lines if line.startswith(f"# HELP {family} ")))
        assert lines[help_at + 1].startswith(f"# TYPE {family} ")
    assert "# TYPE hitl_input_request_decision_seconds histogram" in lines
    assert "# TYPE hitl_input_requests_total counter" in lines
    assert "# TYPE hitl_turns gauge" in lines
