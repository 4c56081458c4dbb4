"""Scenario 5b, the floor: the least any durable park/resume over PostgreSQL and Redis can cost.

A producer INSERTs a row and commits (the answer is durable), LPUSHes its id; a consumer process waiting in
BRPOP takes it and UPDATEs the row and commits (the resumed work is done). Throughput with 1 and 2
consumers, and end-to-end latency at an open-loop rate.
"""

from __future__ import annotations

import multiprocessing
import time
import uuid
from typing import Any

import psycopg
from redis import Redis

from .config import Bench
from .measure import percentiles
from .stack import wait_for

STOP = b"stop"


def consume(conninfo: str, redis_url: str, key: str, ready: Any) -> None:
    """A consumer process: BRPOP an id, mark its row done (with the time) and commit, until told to stop."""
    redis = Redis.from_url(redis_url)
    with psycopg.connect(conninfo) as conn:
        ready.set()
        while True:
            popped = redis.brpop([key], timeout=5)
            if popped is None:
                continue
            if popped[1] == STOP:
                return
            conn.execute("UPDATE floor_items SET status = 'done', done_at = %s WHERE id = %s",
                         (time.time(), int(popped[1])))
            conn.commit()


def produce(conn: psycopg.Connection[Any], redis: Redis, key: str) -> None:
    """One click: INSERT + commit, then LPUSH the id."""
    row = conn.execute("INSERT INTO floor_items (status, clicked_at) VALUES ('pending', %s) RETURNING id",
                       (time.time(),)).fetchone()
    conn.commit()
    assert row is not None
    redis.lpush(key, row[0])


def run(bench: Bench) -> dict[str, Any]:
    sizes = bench.sizes
    conninfo, key = bench.target.conninfo, f"hitl-bench-floor-{uuid.uuid4().hex[:8]}"
    redis = Redis.from_url(bench.target.redis_url)
    results: dict[str, Any] = {"items": sizes.floor_items}
    with psycopg.connect(conninfo) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS floor_items (id bigserial PRIMARY KEY, status text NOT NULL, "
                     "clicked_at float8 NOT NULL, done_at float8)")
        conn.commit()
        consumers: list[multiprocessing.process.BaseProcess] = []
        context = multiprocessing.get_context("spawn")
        try:
            for count in (1, 2):
                while len(consumers) < count:
                    ready = context.Event()
                    consumers.append(context.Process(target=consume, args=(conninfo, bench.target.redis_url, key,
                                                                           ready)))
                    consumers[-1].start()
                    if not ready.wait(60):
                        raise RuntimeError("a floor consumer did not start")
                results[f"consumers_{count}"] = throughput(conn, redis, key, sizes.floor_items)
            latency_n = max(1, int(sizes.floor_rate * sizes.rate_seconds))
            results["latency"] = {"rate": sizes.floor_rate, **latency(conn, redis, key, latency_n, sizes.floor_rate)}
        finally:
            for _ in consumers:
                redis.lpush(key, STOP)
            for process in consumers:
                process.join(10)
            redis.delete(key)
            redis.close()
            conn.execute("DROP TABLE floor_items")
            conn.commit()
    return results


def throughput(conn: psycopg.Connection[Any], redis: Redis, key: str, n: int) -> dict[str, Any]:
    """n clicks as fast as one producer makes them; cycles/s until the last one is done."""
    conn.execute("TRUNCATE floor_items")
    conn.commit()
    started = time.perf_counter()
    for _ in range(n):
        produce(conn, redis, key)
    wait_for(lambda: pending(conn) == 0, 60 + n, f"{n} floor items")
    elapsed = time.perf_counter() - started
    return {"cycles_per_s": round(n / elapsed, 1), "seconds": round(elapsed, 3)}


def latency(conn: psycopg.Connection[Any], redis: Redis, key: str, n: int, rate: float) -> dict[str, Any]:
    """n clicks at `rate` per second by the clock; click-to-done latency of each."""
    conn.execute("TRUNCATE floor_items")
    conn.commit()
    start = time.perf_counter() + 0.05
    for i in range(n):
        delay = start + i / rate - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        produce(conn, redis, key)
    wait_for(lambda: pending(conn) == 0, 60, f"{n} floor items")
    rows = conn.execute("SELECT (done_at - clicked_at) * 1000 FROM floor_items").fetchall()
    conn.commit()
    return {"click_to_done_ms": percentiles([float(r[0]) for r in rows])}


def pending(conn: psycopg.Connection[Any]) -> int:
    row = conn.execute("SELECT count(*) FROM floor_items WHERE status = 'pending'").fetchone()
    conn.commit()
    return int(row[0]) if row else 0
