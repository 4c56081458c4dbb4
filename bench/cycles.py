"""Scenario 1, cycle throughput at the engine level (no HTTP).

N turns are opened, park on an approval, are settled through the engine's answer path, and are resumed to
completion, by 1 and then 2 `hitl worker` processes of each RQ worker class. What LangGraph does in each of
its processes (scenario 5a: `invoke()` a thread until it parks, `invoke(Command(resume=...))` it to the
end), the gateway splits between client processes, as many as there are workers (they stand for the web
processes: they open the sessions and answer the approvals, through the engine's calls), and the workers,
which run the turns:

* park: the clients open N sessions; each turn's job is pushed to the workers as its session commits; the
  clock runs until the N turns are `waiting`;
* settle: the clients answer the N approvals; the resume jobs stay in the outbox, so the clock measures
  the answering alone;
* resume: this process pushes the outbox's jobs at once; the clock runs until the N turns are `completed`.

The workers do not sweep here: a sweep would push the held jobs early (scenario 3 measures sweeping).

Before them, the same cycle in this one process, its jobs run by the embedded executor: the engine's own CPU
time per cycle, with no queue and no other process in it (where a change to the engine shows; it moves with
the machine too, so two trees are compared side by side), and the statements, commits and unit-of-work
flushes a cycle takes.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import event
from sqlalchemy.orm import Session as DbSession

from engine.answers.submit import submit_responses
from engine.jobs.executors import InlineExecutor
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse
from engine.store.storage import pack_id, unpack_id
from engine.turns.sessions import open_session

from .config import Bench
from .measure import engine_bytes, wait_turns
from .seed import REQUESTER
from .stack import Deployment, Target, cpu_ms_per, cpu_seconds, harness_runtime, rq_executor, truncate_engine_tables

WORKER_CLASSES = ("fork", "simple")
NO_SWEEP = 24 * 3600.0
BARRIER_SECONDS = 600.0


class OutboxOnly:
    """An executor that pushes nothing: committed jobs wait in the outbox until the run pushes them."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        return None

    def waiting_since(self) -> datetime | None:
        return None  # it cannot tell: the outbox sweep pushes after its interval


def run(bench: Bench) -> dict[str, Any]:
    n = bench.sizes.cycles
    truncate_engine_tables(bench.target)
    in_process = one_process(bench.target, n)
    runs: dict[str, Any] = {}
    for worker_class in WORKER_CLASSES:
        deployment = Deployment(bench.target, sweep_seconds=NO_SWEEP)
        try:
            for count in (1, 2):
                deployment.start_workers(count - len(deployment.workers), worker_class)
                runs[f"{worker_class}_{count}"] = cycle_run(bench.target, n, count, timeout=60 + n,
                                                            workers=deployment.worker_pids())
        finally:
            deployment.close()
    best = max(WORKER_CLASSES, key=lambda c: runs[f"{c}_2"]["cycles_per_s"])
    return {"turns": n, "clients": "as many processes as workers", "in_process": in_process, "runs": runs,
            "best_worker_class": best}


def one_process(target: Target, n: int) -> dict[str, Any]:
    """n cycles in this process (after n // 4 to warm up): open a session, run its turn until it parks,
    answer the approval, run the turn to its end; the engine's CPU time, statements, commits and flushes per
    cycle (the CPU time includes the harness's lookup of each approval, one indexed SELECT)."""
    executor = InlineExecutor(workers=1)  # the embedded default's executor, one job at a time
    rt = harness_runtime(target, executor)
    seen = {"statements": 0, "commits": 0, "flushes": 0}

    def count(what: str) -> Any:
        def counted(*_: Any) -> None:
            seen[what] += 1
        return counted

    def cycle(conn: psycopg.Connection[Any]) -> None:
        session_id = open_session(rt, REQUESTER, message="go").session_id
        executor.join()
        row = conn.execute("SELECT request_id FROM input_requests WHERE session_id = %s AND status = 'pending'",
                           (pack_id(session_id),)).fetchone()
        assert row is not None, f"the turn of {session_id} did not park"
        submit_responses(rt, REQUESTER, [InputResponse(request_id=unpack_id(row[0]), option_id="approve")])
        executor.join()

    listeners = [(rt.db.engine, "before_cursor_execute", count("statements")),
                 (rt.db.engine, "commit", count("commits")), (DbSession, "after_flush", count("flushes"))]
    try:
        with psycopg.connect(target.conninfo, autocommit=True) as conn:  # the harness's reads: not counted
            for _ in range(max(1, n // 4)):
                cycle(conn)
            for target_, name, listener in listeners:
                event.listen(target_, name, listener)
            started = time.process_time()
            for _ in range(n):
                cycle(conn)
            cpu = time.process_time() - started
    finally:
        for target_, name, listener in listeners:
            if event.contains(target_, name, listener):
                event.remove(target_, name, listener)
        executor.shutdown()
        rt.db.dispose()
    return {"cycles": n, "cpu_ms_per_cycle": round(cpu / n * 1000, 2),
            **{f"{what}_per_cycle": round(number / n, 1) for what, number in seen.items()}}


def client(target: Target, count: int, barrier: Any) -> None:
    """One client process: open `count` sessions (their jobs pushed as they commit), then, when told, answer
    their approvals (their jobs left in the outbox)."""
    live = harness_runtime(target, rq_executor(target))
    answering = harness_runtime(target, OutboxOnly())
    try:
        barrier.wait(BARRIER_SECONDS)
        sessions = [open_session(live, REQUESTER, message="go").session_id for _ in range(count)]
        barrier.wait(BARRIER_SECONDS)
        barrier.wait(BARRIER_SECONDS)
        with psycopg.connect(target.conninfo) as conn:
            request_ids = [unpack_id(r[0]) for r in conn.execute(
                "SELECT request_id FROM input_requests WHERE session_id = ANY(%s) AND status = 'pending'",
                ([pack_id(s) for s in sessions],)).fetchall()]
        for request_id in request_ids:
            submit_responses(answering, REQUESTER, [InputResponse(request_id=request_id, option_id="approve")])
        barrier.wait(BARRIER_SECONDS)
    finally:
        live.db.dispose()
        answering.db.dispose()


def cycle_run(target: Target, n: int, clients: int, timeout: float, workers: list[int]) -> dict[str, Any]:
    """Park n turns, settle their n approvals, resume them to completion; each phase timed on its own, and
    the CPU each role's processes spent over the three (the clients, exited by then, read before they are
    reaped; `harness`: this process, pushing the resume jobs and watching the turns)."""
    truncate_engine_tables(target)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(clients + 1)
    shares = [n // clients + (1 if i < n % clients else 0) for i in range(clients)]
    processes = [context.Process(target=client, args=(target, share, barrier)) for share in shares]
    for process in processes:
        process.start()
    rt = harness_runtime(target, rq_executor(target))
    try:
        empty = engine_bytes(target)
        roles = {"workers": workers, "clients": [p.pid for p in processes if p.pid is not None],
                 "harness": [os.getpid()]}
        barrier.wait(BARRIER_SECONDS)
        cpu_before = cpu_seconds(roles)
        started = time.perf_counter()
        wait_turns(target, "waiting", n, timeout)
        park = time.perf_counter() - started
        barrier.wait(BARRIER_SECONDS)
        parked_bytes = engine_bytes(target) - empty
        barrier.wait(BARRIER_SECONDS)
        started = time.perf_counter()
        barrier.wait(BARRIER_SECONDS)
        settle = time.perf_counter() - started
        with psycopg.connect(target.conninfo) as conn:
            rows = [(r[0], r[1], list(r[2])) for r in conn.execute("SELECT id, job, args FROM outbox ORDER BY id")]
        started = time.perf_counter()
        rt.push(rows)
        wait_turns(target, "completed", n, timeout)
        resume = time.perf_counter() - started
        cpu_after = cpu_seconds(roles)
    finally:
        rt.db.dispose()
        for process in processes:
            process.join(30)
            if process.is_alive():
                process.kill()
    return {
        "clients": clients,
        "park_s": round(park, 3), "settle_s": round(settle, 3), "resume_s": round(resume, 3),
        "park_per_s": round(n / park, 1), "settle_per_s": round(n / settle, 1), "resume_per_s": round(n / resume, 1),
        "cycles_per_s": round(n / (park + settle + resume), 1),
        "bytes_per_parked_turn": round(parked_bytes / n),
        "cpu_ms_per_cycle": cpu_ms_per(cpu_before, cpu_after, n),
    }
