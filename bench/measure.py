"""Measuring: percentiles, table sizes, completion times, and an open-loop HTTP load generator."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import psycopg
from redis import Redis
from rq import Queue, Worker

from engine.store.storage import pack_id, unpack_id
from engine.store.tables import Base

from .seed import Parked
from .stack import Target, wait_for


def percentiles(values_ms: Sequence[float]) -> dict[str, float | int | None]:
    """p50/p95/p99 (nearest rank), mean and max of millisecond samples, rounded to 0.1 ms."""
    ordered = sorted(values_ms)
    if not ordered:
        return {"count": 0, "p50": None, "p95": None, "p99": None, "mean": None, "max": None}

    def rank(p: float) -> float:
        return round(ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)], 1)

    return {"count": len(ordered), "p50": rank(50), "p95": rank(95), "p99": rank(99),
            "mean": round(sum(ordered) / len(ordered), 1), "max": round(ordered[-1], 1)}


def relation_bytes(conninfo: str, tables: Sequence[str]) -> int:
    """Tables plus their indexes and TOAST (pg_total_relation_size), added up."""
    with psycopg.connect(conninfo) as conn:
        row = conn.execute("SELECT sum(pg_total_relation_size(quote_ident(t)))::bigint FROM unnest(%s::text[]) t",
                           (list(tables),)).fetchone()
    return int(row[0] or 0) if row else 0


def engine_bytes(target: Target) -> int:
    return relation_bytes(target.conninfo, [t.name for t in Base.metadata.sorted_tables])


def wait_turns(target: Target, status: str, count: int, timeout: float) -> None:
    """Until `count` turns are in `status` (one connection, one query per look); a failed turn aborts: it
    would make the run meaningless."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        def done() -> bool:
            row = conn.execute("SELECT count(*) FILTER (WHERE status = %s), (array_agg(id) FILTER (WHERE status = "
                               "'failed'))[1] FROM turns", (status,)).fetchone()
            assert row is not None
            if row[1] is not None:
                raise RuntimeError(f"turn {unpack_id(row[1])} failed; see the worker logs")
            return int(row[0]) >= count

        wait_for(done, timeout, f"{count} turns {status}")


def completed_at(target: Target, parked: Sequence[Parked], timeout: float) -> dict[str, float]:
    """Wall-clock time (epoch seconds) of each turn's `turn.completed` event, waiting up to `timeout` for all;
    turns still unfinished then are left out."""
    missing = {p.turn_id for p in parked}
    deadline = time.monotonic() + timeout
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        while True:
            rows = conn.execute("SELECT id FROM turns WHERE id = ANY(%s) AND status = 'completed'",
                                ([pack_id(t) for t in missing],)).fetchall()
            missing -= {unpack_id(r[0]) for r in rows}
            if not missing or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        sessions = [p.session_id for p in parked if p.turn_id not in missing]
        rows = conn.execute("SELECT turn_id, extract(epoch FROM at)::float8 FROM events WHERE session_id = ANY(%s) "
                            "AND type = 'turn.completed'", ([pack_id(s) for s in sessions],)).fetchall()
    return {unpack_id(r[0]): float(r[1]) for r in rows}


@dataclass(frozen=True)
class HttpRequest:
    method: str
    path: str
    body: bytes
    headers: dict[str, str]


@dataclass(frozen=True)
class Sent:
    """One request: when it left (epoch seconds), its status (0 on a network error), its response time."""

    at: float
    status: int
    ms: float


async def _send(port: int, request: HttpRequest, timeout: float) -> Sent:
    head = [f"{request.method} {request.path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Connection: close",
            f"Content-Length: {len(request.body)}", *(f"{k}: {v}" for k, v in request.headers.items())]
    raw = ("\r\n".join(head) + "\r\n\r\n").encode() + request.body
    sent_at, started = time.time(), time.perf_counter()
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
        writer.write(raw)
        response = await asyncio.wait_for(reader.read(), timeout)
        writer.close()
        status = int(response.split(b" ", 2)[1])
    except (OSError, TimeoutError, IndexError, ValueError):
        status = 0
    return Sent(sent_at, status, (time.perf_counter() - started) * 1000)


async def _open_loop(port: int, requests: Sequence[HttpRequest], rate: float, timeout: float) -> list[Sent]:
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.05
    tasks: list[asyncio.Task[Sent]] = []
    for i, request in enumerate(requests):
        delay = start + i / rate - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(_send(port, request, timeout)))
    return list(await asyncio.gather(*tasks))


def open_loop(port: int, requests: Sequence[HttpRequest], rate: float, timeout: float = 30.0) -> list[Sent]:
    """Send `requests` at `rate` per second by the clock, never waiting on a response to send the next."""
    return asyncio.run(_open_loop(port, requests, rate, timeout))


def send_one(port: int, request: HttpRequest, timeout: float = 30.0) -> Sent:
    return asyncio.run(_send(port, request, timeout))


def counts_now(target: Target) -> dict[str, int]:
    """Running totals of the deployment's work: outbox rows ever written (each a job, run by a worker from the
    queue or by the job that wrote it), the jobs its workers took from the queue, committed transactions of its
    database, and commands Redis has run (every client's)."""
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        jobs, transactions = conn.execute(
            "SELECT (SELECT last_value FROM pg_sequences WHERE sequencename = 'outbox_id_seq'),"
            " xact_commit FROM pg_stat_database WHERE datname = current_database()").fetchone() or (0, 0)
    with Redis.from_url(target.redis_url) as redis:
        commands = sum(stat["calls"] for stat in redis.info("commandstats").values())
        queued = sum(worker.successful_job_count + worker.failed_job_count
                     for worker in Worker.all(connection=redis, queue=Queue(target.queue, connection=redis)))
    return {"jobs": int(jobs or 0), "queued_jobs": queued, "transactions": int(transactions),
            "redis_commands": commands}


def per_item(before: dict[str, int], after: dict[str, int], count: int) -> dict[str, float]:
    """Each running total's growth between two `counts_now` readings, per item."""
    return {name: round((after[name] - before[name]) / count, 1) for name in after}


def summary(sent: Sequence[Sent], completed: dict[str, float], parked: Sequence[Parked],
            gave_up: float) -> dict[str, Any]:
    """Per-rate figures: achieved send rate, response times, and click-to-completed latencies. A turn not
    completed when the wait ended (at epoch `gave_up`) counts the time waited so far: the percentiles are
    then lower bounds, and `completed` < `sent` says so."""
    span = sent[-1].at - sent[0].at if len(sent) > 1 else 0.0
    latencies = [(completed.get(p.turn_id, gave_up) - s.at) * 1000 for s, p in zip(sent, parked, strict=True)]
    busy = max(completed.values(), default=sent[0].at) - sent[0].at
    return {
        "sent": len(sent), "achieved_rate": round((len(sent) - 1) / span, 1) if span else None,
        "errors": sum(1 for s in sent if not 200 <= s.status < 300), "completed": len(completed),
        "completed_per_s": round(len(completed) / busy, 1) if busy > 0 else None,
        "response_ms": percentiles([s.ms for s in sent]), "answer_to_completed_ms": percentiles(latencies),
    }
