"""The benchmark harness runs end to end at tiny sizes, so it never rots. Figures are not asserted:
performance is measured by `python -m bench`, never in timed tests."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.services import require_postgres, require_redis

ROOT = Path(__file__).resolve().parents[2]
OURS = "floor,cycles,answer,cost,scale"
"""Every scenario but LangGraph's, which needs the `bench` extra (CI installs only `test`)."""
RATIO_KEYS = {"click_cpu_vs_langgraph_cycle_cpu", "completed_vs_offered_at_100", "answer_p99_ms_at_100",
              "answer_p50_at_20_vs_floor", "cycles_vs_langgraph", "bytes_per_parked_turn_vs_langgraph",
              "webhook_p99_ms_at_200rps", "settle_100k_vs_1k", "rss_after_vs_before"}
NEEDS_LANGGRAPH = {"click_cpu_vs_langgraph_cycle_cpu", "cycles_vs_langgraph", "bytes_per_parked_turn_vs_langgraph"}
SMALLEST = ["--cycles", "2", "--rates", "20,100,200", "--scale-levels", "10,20", "--workers", "1"]
"""Smaller than `--quick`, as small as still shows each figure: a turn per client of each cycle run, the two click
rates the ratios are set at (and the webhook's 200/s), two scale levels, one worker."""


def run_bench(tmp_path: Path, scenarios: str, *sizes: str) -> dict[str, Any]:
    env = dict(os.environ, HITL_BENCH_DATABASE_URL=require_postgres(), HITL_BENCH_REDIS_URL=require_redis())
    done = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--scenarios", scenarios, "--out", str(tmp_path),
         "--db-name", f"hitl_bench_smoke_{uuid.uuid4().hex[:8]}", *sizes],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert (tmp_path / "latest.md").read_text().startswith("Run ")
    assert not (tmp_path / "partial.json").exists()  # kept only while a run is under way, or after it failed
    results: dict[str, Any] = json.loads((tmp_path / "latest.json").read_text())
    return results


def is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def test_a_quick_run_of_our_scenarios_writes_every_figure(tmp_path: Path) -> None:
    results = run_bench(tmp_path, OURS, *SMALLEST)

    assert set(results["machine"]) == {"nproc", "memory_mib", "cpu_model"}
    assert results["date"] and len(results["commit"]) in (40, len("unknown"))
    ratios = results["ratios"]
    assert set(ratios) == RATIO_KEYS
    for key in RATIO_KEYS - NEEDS_LANGGRAPH:
        assert is_number(ratios[key]), (key, ratios[key])
    assert all(ratios[key] is None for key in NEEDS_LANGGRAPH)  # LangGraph did not run
    alone = results["cycles"]["in_process"]
    assert alone["cpu_ms_per_cycle"] > 0
    assert alone["commits_per_cycle"] == 7  # open; claim, park; answer; claim, the call's result, the end
    assert alone["flushes_per_cycle"] == 2 and alone["statements_per_cycle"] > 0
    for run in results["cycles"]["runs"].values():
        assert all(is_number(run[k]) for k in ("park_per_s", "settle_per_s", "resume_per_s", "cycles_per_s"))
        assert set(run["cpu_ms_per_cycle"]) == {"workers", "clients", "harness", "postgres", "redis"}
        assert run["cpu_ms_per_cycle"]["workers"] > 0  # the workers' processes were found and read
    for rate in results["answer"]["rates"].values():
        assert rate["sent"] and rate["errors"] == 0  # every click accepted (figures are not asserted)
        assert rate["completed"] == rate["sent"]  # and each one's turn completed (a click not taken never does)
        assert set(rate["per_click"]) == {"jobs", "queued_jobs", "transactions", "redis_commands"}
        assert rate["per_click"]["jobs"] >= 1  # the outbox's sequence was read
        assert set(rate["cpu_ms_per_click"]) == {"web", "workers", "postgres", "redis"}
    # the gunicorn workers were found and read (over every rate: a few clicks may take less than a clock tick)
    assert sum(rate["cpu_ms_per_click"]["web"] * rate["sent"] for rate in results["answer"]["rates"].values()) > 0
    for level in results["scale"]["levels"].values():  # the control deployment answered alongside each level
        assert level["errors"] == level["control"]["errors"] == 0
    assert results["scale"]["control_parked"] == min(map(int, results["scale"]["levels"]))
    assert is_number(results["cost"]["bytes_per_parked_turn"])
    assert is_number(results["floor"]["latency"]["click_to_done_ms"]["p99"])


def test_langgraph_runs_side_by_side_when_installed(tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.postgres",
                        reason="LangGraph's scenario needs the bench extra: pip install -e '.[bench]'")
    results = run_bench(tmp_path, "langgraph")

    for run in results["langgraph"]["runs"].values():
        assert is_number(run["cycles_per_s"]) and is_number(run["bytes_per_parked_thread"])
        assert set(run["cpu_ms_per_cycle"]) == {"langgraph", "postgres", "redis"}
        assert run["cpu_ms_per_cycle"]["langgraph"] > 0  # its processes were found and read
