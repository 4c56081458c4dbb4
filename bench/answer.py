"""Scenario 2, answer to completion end to end, at open-loop click rates.

Parked turns are seeded in bulk; each click approves one of them through the gunicorn web processes,
scheduled by the clock (never waiting on a response to send the next). A click's latency runs from the
moment it was sent to the `at` of its turn's `turn.completed` event (stamped in the transaction that
commits it); the response time is the webhook's own. What a click costs is read around each rate: the CPU of
every process, and the jobs (outbox rows written), PostgreSQL transactions and Redis commands per click
(transactions include the harness's reads of `turn.completed`; commands, the bench's own queue reads).

A click is a signed Slack `block_actions` interaction posted to `/slack/interactions` (the real webhook
path: verified, stored as an inbound item, applied by a worker, the card updated through the fake Slack
Web API), or with `--click rest` a `PATCH /api/requests/<id>` approve from loopback (the local operator).
"""

from __future__ import annotations

import json
import time
from typing import Any

from . import slack
from .config import Bench
from .measure import HttpRequest, completed_at, counts_now, open_loop, per_item, summary
from .seed import Cloner, Parked, park_template
from .stack import cpu_ms_per, cpu_seconds


def approve(parked: Parked) -> HttpRequest:
    """The REST approve of a parked turn's request."""
    body = json.dumps({"optionId": "approve"}).encode()
    return HttpRequest("PATCH", f"/api/requests/{parked.request_id}", body, {"Content-Type": "application/json"})


def settled_counts(bench: Bench) -> dict[str, int]:
    """`counts_now` once PostgreSQL's statistics caught up (`Sizes.stats_seconds`)."""
    time.sleep(bench.sizes.stats_seconds)
    return counts_now(bench.target)


def run(bench: Bench) -> dict[str, Any]:
    sizes = bench.sizes
    deployment = bench.fresh_deployment()
    if bench.click == "slack":
        template, build = slack.park_slack_template(bench.target, bench.slack_api_url), slack.click
    else:
        template, build = park_template(bench.target), approve
    counts = {rate: max(1, int(rate * sizes.rate_seconds)) for rate in sizes.rates}
    pool = Cloner(bench.target, template).clone(sum(counts.values()))
    roles = {"web": deployment.web_pids(), "workers": deployment.worker_pids()}
    rates: dict[str, Any] = {}
    counted = settled_counts(bench)
    for rate, n in counts.items():
        batch, pool = pool[:n], pool[n:]
        requests = [build(p) for p in batch]
        before = cpu_seconds(roles)
        sent = open_loop(deployment.port, requests, rate)
        completed = completed_at(bench.target, batch, sizes.drain_seconds)
        rates[str(rate)] = {**summary(sent, completed, batch, gave_up=time.time()),
                            "cpu_ms_per_click": cpu_ms_per(before, cpu_seconds(roles), n)}
        after = settled_counts(bench)
        rates[str(rate)]["per_click"] = per_item(counted, after, n)
        counted = after
    return {"click": bench.click, "seconds_per_rate": sizes.rate_seconds, "rates": rates}
