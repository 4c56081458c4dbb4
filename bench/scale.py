"""Scenario 3, scale: settle+resume latency of one request with 1k, 10k and 100k parked turns in the database.

The parked turns are seeded in bulk, level after level; at each level a sample of them is answered one
at a time (`PATCH /api/requests/<id>`, closed loop, nothing else in flight): the response time is the
settle latency, and the turn's `turn.completed` `at` minus the send time the settle+resume latency.
The workers sweep on their usual schedule meanwhile, over everything parked.
"""

from __future__ import annotations

import random
import time
from typing import Any

from .answer import approve
from .config import Bench
from .measure import completed_at, percentiles, send_one
from .seed import Cloner, Parked, park_template

SAMPLE_TIMEOUT = 60.0
"""A sample not completed by then counts this long (a lower bound), and as `incomplete`."""


def sample_latencies(port: int, bench: Bench, sample: list[Parked]) -> dict[str, Any]:
    """Answer each sampled turn in turn, waiting for it to complete before the next."""
    settle, settle_resume, errors, incomplete = [], [], 0, 0
    for parked in sample:
        sent = send_one(port, approve(parked))
        done = completed_at(bench.target, [parked], SAMPLE_TIMEOUT)
        errors += sent.status != 200
        incomplete += parked.turn_id not in done
        settle.append(sent.ms)
        settle_resume.append((done.get(parked.turn_id, time.time()) - sent.at) * 1000)
    return {"settle_ms": percentiles(settle), "settle_resume_ms": percentiles(settle_resume), "errors": errors,
            "incomplete": incomplete}


def run(bench: Bench) -> dict[str, Any]:
    sizes = bench.sizes
    deployment = bench.fresh_deployment()
    template = park_template(bench.target)
    cloner = Cloner(bench.target, template)
    pool: list[Parked] = [template]
    seeded = 1
    levels: dict[str, Any] = {}
    for level in sizes.scale_levels:
        pool += cloner.clone(level - seeded)
        seeded = level
        sample = random.sample(pool, sizes.scale_samples)
        taken = set(sample)
        pool = [p for p in pool if p not in taken]
        levels[str(level)] = sample_latencies(deployment.port, bench, sample)
    return {"samples": sizes.scale_samples, "levels": levels}
