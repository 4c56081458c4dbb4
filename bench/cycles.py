"""Scenario 1, cycle throughput at the engine level (no HTTP).

N turns park on an approval, are settled through the engine's answer path, and are resumed to completion
by 1 and then 2 `hitl worker` processes of each RQ worker class. Each phase's jobs are held back and pushed
at once, so the clock measures the workers draining the queue, not this process producing it. The workers
do not sweep here: a sweep would take the held jobs for lost ones and run them early (scenario 3 measures
sweeping).
"""

from __future__ import annotations

import time
from typing import Any

import psycopg

from engine.protocol import InputResponse
from engine.responses import submit_responses
from engine.runtime import Runtime
from engine.sessions import open_session

from .config import Bench
from .measure import engine_bytes, wait_turns
from .seed import REQUESTER
from .stack import Deployment, harness_runtime, rq_executor, truncate_engine_tables

WORKER_CLASSES = ("fork", "simple")
NO_SWEEP = 24 * 3600.0


class HeldExecutor:
    """Keeps the jobs a phase produces until `release()` pushes them all to the real executor."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.held: list[tuple[Runtime, str, list[Any], str, int]] = []

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        self.held.append((runtime, job, args, job_id, outbox_id))

    def release(self) -> None:
        held, self.held = self.held, []
        for runtime, job, args, job_id, outbox_id in held:
            self.inner.submit(runtime, job, args, job_id, outbox_id)


def run(bench: Bench) -> dict[str, Any]:
    n = bench.sizes.cycles
    runs: dict[str, Any] = {}
    for worker_class in WORKER_CLASSES:
        deployment = Deployment(bench.target, sweep_seconds=NO_SWEEP)
        try:
            for count in (1, 2):
                deployment.start_workers(count - len(deployment.workers), worker_class)
                runs[f"{worker_class}_{count}"] = cycle_run(bench, n, timeout=60 + n)
        finally:
            deployment.close()
    best = max(WORKER_CLASSES, key=lambda c: runs[f"{c}_2"]["cycles_per_s"])
    return {"turns": n, "runs": runs, "best_worker_class": best}


def cycle_run(bench: Bench, n: int, timeout: float) -> dict[str, Any]:
    """Park n turns, settle their n approvals, resume them to completion; each phase timed on its own."""
    target = bench.target
    truncate_engine_tables(target)
    held = HeldExecutor(rq_executor(target))
    rt = harness_runtime(target, held)
    try:
        empty = engine_bytes(target)
        for _ in range(n):
            open_session(rt, REQUESTER, message="go")
        started = time.perf_counter()
        held.release()
        wait_turns(target, "waiting", n, timeout)
        park = time.perf_counter() - started
        parked_bytes = engine_bytes(target) - empty
        with psycopg.connect(target.conninfo) as conn:
            request_ids = [r[0] for r in conn.execute("SELECT request_id FROM input_requests WHERE status = "
                                                      "'pending'").fetchall()]
        started = time.perf_counter()
        for request_id in request_ids:
            submit_responses(rt, REQUESTER, [InputResponse(request_id=request_id, option_id="approve")])
        settle = time.perf_counter() - started
        started = time.perf_counter()
        held.release()
        wait_turns(target, "completed", n, timeout)
        resume = time.perf_counter() - started
    finally:
        rt.db.dispose()
    return {
        "park_s": round(park, 3), "settle_s": round(settle, 3), "resume_s": round(resume, 3),
        "park_per_s": round(n / park, 1), "settle_per_s": round(n / settle, 1), "resume_per_s": round(n / resume, 1),
        "cycles_per_s": round(n / (park + settle + resume), 1),
        "bytes_per_parked_turn": round(parked_bytes / n),
    }
