"""Scenario 5a, the peer: LangGraph with `PostgresSaver` on the same PostgreSQL, doing the same cycle.

The graph is the bench agent's loop: a model node proposes the `touch` call, an approval node calls
`interrupt()` (the thread parks in the checkpointer), a tool node runs it, the model node answers. Each
thread is parked with `invoke(...)` and resumed with `invoke(Command(resume="approve"))` in 1 and then 2
processes (like 1 and 2 `hitl worker`s), with LangGraph's default durability. The CPU of its processes,
PostgreSQL's and Redis's is read over the park and the resume phases, as ours is (`stack.cpu_seconds`).
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any, TypedDict

import psycopg

from .config import Bench
from .measure import relation_bytes
from .stack import conninfo, cpu_ms_per, cpu_seconds, drop_database, recreate_database

BARRIER_SECONDS = 600.0


class State(TypedDict, total=False):
    call: dict[str, Any] | None
    approved: bool
    result: dict[str, Any] | None
    answer: str


def model(state: State) -> State:
    if state.get("result") is not None:
        return {"answer": "done"}
    return {"call": {"tool": "touch", "input": {}}}


def approve(state: State) -> State:
    from langgraph.types import interrupt

    return {"approved": interrupt({"prompt": "Approve touch?", "call": state.get("call")}) == "approve"}


def touch(state: State) -> State:
    return {"result": {"touched": True} if state.get("approved") else {"denied": True}}


def graph(checkpointer: Any) -> Any:
    from langgraph.graph import END, START, StateGraph

    builder = StateGraph(State)
    builder.add_node("model", model)
    builder.add_node("approve", approve)
    builder.add_node("touch", touch)
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", lambda s: END if s.get("answer") else "approve")
    builder.add_edge("approve", "touch")
    builder.add_edge("touch", "model")
    return builder.compile(checkpointer=checkpointer)


def park(app: Any, thread_id: str) -> None:
    out = app.invoke({"call": None, "result": None}, {"configurable": {"thread_id": thread_id}})
    if "__interrupt__" not in out:
        raise RuntimeError(f"thread {thread_id} did not park: {out}")


def resume(app: Any, thread_id: str) -> None:
    from langgraph.types import Command

    out = app.invoke(Command(resume="approve"), {"configurable": {"thread_id": thread_id}})
    if out.get("answer") != "done":
        raise RuntimeError(f"thread {thread_id} did not complete: {out}")


def serve(dsn: str, thread_ids: list[str], barrier: Any) -> None:
    """One process: a warm-up cycle, then park every thread, then (once told) resume every thread."""
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(dsn) as saver:
        app = graph(saver)
        warm = f"warm-{uuid.uuid4().hex}"
        park(app, warm)
        resume(app, warm)
        barrier.wait(BARRIER_SECONDS)
        for thread_id in thread_ids:
            park(app, thread_id)
        barrier.wait(BARRIER_SECONDS)
        barrier.wait(BARRIER_SECONDS)  # the parent reads table sizes here
        for thread_id in thread_ids:
            resume(app, thread_id)
        barrier.wait(BARRIER_SECONDS)


def run(bench: Bench) -> dict[str, Any]:
    try:
        from langgraph.checkpoint.postgres import PostgresSaver
    except ImportError:
        return {"skipped": "langgraph and langgraph-checkpoint-postgres are not installed (pip install -e '.[bench]')"}

    name = f"{database_name(bench)}_langgraph"
    dsn = conninfo(recreate_database(bench.server_url, name))
    try:
        with PostgresSaver.from_conn_string(dsn) as saver:
            saver.setup()
        runs = {f"processes_{count}": cycle_run(dsn, count, bench.sizes.peer_threads) for count in (1, 2)}
    finally:
        drop_database(bench.server_url, name)
    return {"threads": bench.sizes.peer_threads, "durability": "default", "runs": runs}


def database_name(bench: Bench) -> str:
    return str(psycopg.conninfo.conninfo_to_dict(bench.target.conninfo)["dbname"])


def checkpoint_bytes(dsn: str) -> int:
    with psycopg.connect(dsn) as conn:
        tables = [r[0] for r in conn.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")]
    return relation_bytes(dsn, tables)


def cycle_run(dsn: str, processes: int, n: int) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(processes + 1)
    threads = [f"t-{uuid.uuid4().hex}" for _ in range(n)]
    workers = [context.Process(target=serve, args=(dsn, threads[i::processes], barrier)) for i in range(processes)]
    for worker in workers:
        worker.start()
    roles = {"langgraph": [worker.pid for worker in workers if worker.pid is not None]}
    try:
        barrier.wait(BARRIER_SECONDS)
        before = checkpoint_bytes(dsn)
        cpu_parking = cpu_seconds(roles)
        started = time.perf_counter()
        barrier.wait(BARRIER_SECONDS)
        park_s = time.perf_counter() - started
        cpu_parked = cpu_seconds(roles)
        parked = checkpoint_bytes(dsn) - before
        barrier.wait(BARRIER_SECONDS)
        cpu_resuming = cpu_seconds(roles)
        started = time.perf_counter()
        barrier.wait(BARRIER_SECONDS)
        resume_s = time.perf_counter() - started
        cpu_resumed = cpu_seconds(roles)
    finally:
        for worker in workers:
            worker.join(30)
            if worker.is_alive():
                worker.kill()
    parking, resuming = cpu_ms_per(cpu_parking, cpu_parked, n), cpu_ms_per(cpu_resuming, cpu_resumed, n)
    return {"park_s": round(park_s, 3), "resume_s": round(resume_s, 3), "park_per_s": round(n / park_s, 1),
            "resume_per_s": round(n / resume_s, 1), "cycles_per_s": round(n / (park_s + resume_s), 1),
            "bytes_per_parked_thread": round(parked / n),
            "cpu_ms_per_cycle": {role: round(parking[role] + resuming[role], 1) for role in parking}}

