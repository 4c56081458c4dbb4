"""Scenario 4, the cost of a parked turn: PostgreSQL bytes, and the memory of the processes.

Bytes: pg_total_relation_size (tables, indexes, TOAST) of every engine table, before and after seeding
N parked turns, over N. Memory: VmRSS of the gunicorn workers and the `hitl worker`s after a few warm-up
answer-to-completion cycles, then again after N turns parked, the same cycles ran again and each worker
has swept over the parked turns once.
"""

from __future__ import annotations

import time
from typing import Any

from .answer import approve
from .config import Bench
from .measure import completed_at, engine_bytes, send_one
from .seed import Cloner, park_template
from .stack import Deployment, rss_kib


def rss(deployment: Deployment) -> dict[str, list[int]]:
    return {"web": [rss_kib(pid) for pid in deployment.web_pids()],
            "worker": [rss_kib(pid) for pid in deployment.worker_pids()]}


def warm_up(bench: Bench, cloner: Cloner) -> None:
    """A few answer-to-completion cycles through every process."""
    deployment = bench.deployment()
    for parked in cloner.clone(bench.sizes.warm_cycles):
        send_one(deployment.port, approve(parked))
        completed_at(bench.target, [parked], 30)


def run(bench: Bench) -> dict[str, Any]:
    n = bench.sizes.cost_parked
    deployment = bench.fresh_deployment()
    cloner = Cloner(bench.target, park_template(bench.target))
    warm_up(bench, cloner)
    before, empty = rss(deployment), engine_bytes(bench.target)
    cloner.clone(n)
    parked_bytes = engine_bytes(bench.target) - empty
    warm_up(bench, cloner)
    time.sleep(bench.sizes.sweep_seconds + 1)
    after = rss(deployment)
    growth = max(a / b for role in before for a, b in zip(after[role], before[role], strict=True))
    return {
        "parked": n, "bytes_per_parked_turn": round(parked_bytes / n),
        "rss_kib": {role: {"before": before[role], "after": after[role]} for role in before},
        "rss_after_vs_before": round(growth, 3),
    }
