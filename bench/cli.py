"""`python -m bench`: set up the bench database and queue, run the scenarios, write JSON and Markdown."""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import answer, cost, cycles, floor, peer, report, scale
from .config import FULL, QUICK, Bench, Sizes
from .stack import ROOT, Target, drop_database, migrated_database

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/9"

SCENARIOS: dict[str, Callable[[Bench], dict[str, Any]]] = {
    "floor": floor.run,
    "langgraph": peer.run,
    "cycles": cycles.run,
    "answer": answer.run,
    "cost": cost.run,
    "scale": scale.run,
}
"""In the order they run: the comparisons first, then ours (cycles picks the worker class the rest use)."""

log = logging.getLogger("bench")


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (the smoke test)")
    parser.add_argument("--scenarios", default=",".join(SCENARIOS),
                        help=f"comma-separated, from {', '.join(SCENARIOS)} (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results", help="where latest.json/.md go")
    parser.add_argument("--workers", type=int, default=2, help="hitl worker processes for answer, cost and scale")
    parser.add_argument("--worker-class", choices=["auto", "fork", "simple"], default="auto",
                        help="auto: the faster class in the cycles scenario (fork when it did not run)")
    parser.add_argument("--click", choices=["slack", "rest"], default="slack",
                        help="what a click of the answer scenario is: a signed Slack block_actions, or a REST PATCH")
    parser.add_argument("--cycles", type=int, help="override: turns per cycle-throughput run")
    parser.add_argument("--rates", help="override: click rates, e.g. 20,50")
    parser.add_argument("--scale-levels", help="override: parked-turn levels, e.g. 1000,10000")
    parser.add_argument("--db-name", default="hitl_bench", help="the bench database (dropped and recreated)")
    args = parser.parse_args(argv)
    unknown = set(args.scenarios.split(",")) - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {', '.join(sorted(unknown))}")
    return args


def sizes(args: argparse.Namespace) -> Sizes:
    chosen = QUICK if args.quick else FULL
    if args.cycles:
        chosen = replace(chosen, cycles=args.cycles)
    if args.rates:
        chosen = replace(chosen, rates=tuple(int(r) for r in args.rates.split(",")))
    if args.scale_levels:
        chosen = replace(chosen, scale_levels=tuple(int(n) for n in args.scale_levels.split(",")))
    return chosen


def machine() -> dict[str, Any]:
    cpuinfo = Path("/proc/cpuinfo").read_text()
    model = next((line.split(":", 1)[1].strip() for line in cpuinfo.splitlines() if line.startswith("model name")),
                 "unknown")
    memory = next(line.split()[1] for line in Path("/proc/meminfo").read_text().splitlines()
                  if line.startswith("MemTotal:"))
    return {"nproc": os.cpu_count(), "memory_mib": int(memory) // 1024, "cpu_model": model}


def commit() -> str:
    done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False)
    return done.stdout.strip() or "unknown"


def prepare(args: argparse.Namespace) -> Bench:
    """A fresh, migrated bench database, a queue name of this run's own, and the log folder."""
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    server = os.environ.get("HITL_BENCH_DATABASE_URL", DEFAULT_DATABASE_URL)
    url = migrated_database(server, args.db_name)
    target = Target(url, os.environ.get("HITL_BENCH_REDIS_URL", DEFAULT_REDIS_URL),
                    f"hitl-bench-{uuid.uuid4().hex[:8]}", logs)
    return Bench(target, server, sizes(args), args.workers,
                 "fork" if args.worker_class == "auto" else args.worker_class, args.click)


def run(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the bench; returns what it wrote to `<out>/latest.json`."""
    args = parse(argv)
    bench = prepare(args)
    chosen = [name for name in SCENARIOS if name in args.scenarios.split(",")]
    results: dict[str, Any] = {"date": datetime.now(UTC).isoformat(timespec="seconds"), "commit": commit(),
                               "machine": machine(), "quick": args.quick, "sizes": asdict(bench.sizes)}
    durations: dict[str, float] = {}
    load: dict[str, float] = {}
    try:
        for name in chosen:
            log.info("scenario %s", name)
            load[name] = os.getloadavg()[0]
            started = time.perf_counter()
            results[name] = SCENARIOS[name](bench)
            durations[name] = round(time.perf_counter() - started, 1)
            # what ran so far survives a later scenario's failure
            (args.out / "partial.json").write_text(json.dumps(results, indent=2) + "\n")
            if name == "cycles" and args.worker_class == "auto":
                bench.worker_class = results[name]["best_worker_class"]
    finally:
        bench.close()
        drop_database(bench.server_url, args.db_name)
    results["worker_class"] = bench.worker_class
    results["scenario_seconds"] = durations
    results["load_average_at_start"] = load  # anything else running on the machine skews every figure
    results["ratios"] = report.ratios(results)
    (args.out / "latest.json").write_text(json.dumps(results, indent=2) + "\n")
    (args.out / "partial.json").unlink(missing_ok=True)
    (args.out / "latest.md").write_text(report.markdown(results))
    return results


def main(argv: Sequence[str] | None = None) -> None:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stop what the run started, as on Ctrl-C
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even when started in the background
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)
    results = run(argv)
    print(report.markdown(results))
