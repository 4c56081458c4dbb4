"""The ratios the issue's targets are set on, and the Markdown table of a run."""

from __future__ import annotations

from typing import Any

TARGETS = {
    "click_cpu_vs_langgraph_cycle_cpu": ("<=", 1.5, "CPU ms of every process per Slack click at {low}/s over "
                                                    "LangGraph's per park-and-resume cycle (2 processes, with "
                                                    "PostgreSQL's)"),
    "completed_vs_offered_at_100": (">=", 0.95, "clicks completed per second over those offered at {high}/s"),
    "answer_p99_ms_at_100": ("<=", 1000.0, "click to turn.completed p99 at {high}/s, ms"),
    "answer_p50_at_20_vs_floor": ("<=", 12.0, "click to turn.completed p50 at {low}/s over the floor's end to end"),
    "cycles_vs_langgraph": (">=", 0.7, "cycles/s over LangGraph's (2 workers, 2 processes)"),
    "bytes_per_parked_turn_vs_langgraph": ("<=", 0.5, "bytes per parked turn over LangGraph's per thread"),
    "webhook_p99_ms_at_200rps": ("<=", 100.0, "webhook response p99 at 200 clicks/s, ms (rates run: {rates})"),
    "settle_100k_vs_1k": ("<=", 1.2, "settle+resume p50 with {levels} parked, answered alternately"),
    "rss_after_vs_before": ("<=", 1.1, "largest VmRSS growth of a process after parking {parked} turns"),
}
"""Each ratio's target and what it is (issue 30's, and issue 7's that it kept). `settle_100k_vs_1k` divides the
largest scale level (100k at full size) by the control deployment answered alternately with it (holding the
smallest level, 1k); `rss_after_vs_before` stands for "no growth of process memory" (10% slack)."""

LOW_RATE, HIGH_RATE = 20, 100
"""The click rates the click targets are set at: a steady load, and the one to keep up with."""


def dig(data: dict[str, Any], *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def ratio(numerator: Any, denominator: Any) -> float | None:
    if not isinstance(numerator, int | float) or not isinstance(denominator, int | float) or not denominator:
        return None
    return round(numerator / denominator, 3)


def ratios(results: dict[str, Any]) -> dict[str, float | None]:
    """Our figures over the peer's and the floor's; None where a scenario it needs did not run."""
    ours_class = results.get("worker_class")
    ours = dig(results, "cycles", "runs", f"{ours_class}_2")
    peer = dig(results, "langgraph", "runs", "processes_2") or {}
    rates = dig(results, "answer", "rates") or {}
    low, high = rates.get(str(LOW_RATE)) or {}, rates.get(str(HIGH_RATE)) or {}
    levels = dig(results, "scale", "levels") or {}
    large = levels[max(levels, key=int)] if levels else {}
    return {
        "click_cpu_vs_langgraph_cycle_cpu": ratio(total(low.get("cpu_ms_per_click")),
                                                  total(peer.get("cpu_ms_per_cycle"))),
        "completed_vs_offered_at_100": ratio(high.get("completed_per_s"), high.get("achieved_rate")),
        "answer_p99_ms_at_100": dig(high, "answer_to_completed_ms", "p99"),
        "answer_p50_at_20_vs_floor": ratio(dig(low, "answer_to_completed_ms", "p50"),
                                           dig(results, "floor", "latency", "click_to_done_ms", "p50")),
        "cycles_vs_langgraph": ratio(dig(ours or {}, "cycles_per_s"), peer.get("cycles_per_s")),
        "bytes_per_parked_turn_vs_langgraph": ratio(dig(results, "cost", "bytes_per_parked_turn"),
                                                    peer.get("bytes_per_parked_thread")),
        "webhook_p99_ms_at_200rps": dig(rates, "200", "response_ms", "p99"),
        "settle_100k_vs_1k": ratio(dig(large, "settle_resume_ms", "p50"),
                                   dig(large, "control", "settle_resume_ms", "p50")),
        "rss_after_vs_before": dig(results, "cost", "rss_after_vs_before"),
    }


def total(cpu_ms: dict[str, float] | None) -> float | None:
    """The CPU milliseconds of every role together (None when not measured)."""
    return round(sum(cpu_ms.values()), 1) if cpu_ms else None


def verdict(key: str, value: float | None) -> str:
    if value is None:
        return "not run"
    op, goal, _ = TARGETS[key]
    met = value >= goal if op == ">=" else value <= goal
    return "met" if met else "missed"


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = [
        f"Run {results['date']} on {m['nproc']} x {m['cpu_model']}, {m['memory_mib']} MiB, commit "
        f"{results['commit'][:10]}{' (quick sizes)' if results.get('quick') else ''}; "
        f"RQ worker class: {results.get('worker_class')}; 1-minute load average when each scenario started: "
        f"{', '.join(f'{k} {v:.1f}' for k, v in results.get('load_average_at_start', {}).items())}.",
        "",
        "| target | measured | goal | |",
        "|---|---|---|---|",
    ]
    levels = sorted(int(level) for level in dig(results, "scale", "levels") or {})
    sizes = {"low": LOW_RATE, "high": HIGH_RATE, "rates": ", ".join(dig(results, "answer", "rates") or {}) or "none",
             "levels": f"{levels[-1]} over a control's {dig(results, 'scale', 'control_parked')}" if levels else "none",
             "parked": dig(results, "cost", "parked")}
    for key, value in results["ratios"].items():
        op, goal, what = TARGETS[key]
        lines.append(f"| `{key}`: {what.format(**sizes)} | {'-' if value is None else value} | {op} {goal} | "
                     f"{verdict(key, value)} |")
    lines += ["", "| figure | value |", "|---|---|"]
    lines += [f"| {name} | {value} |" for name, value in figures(results)]
    return "\n".join(lines) + "\n"


def by_role(name: str, cpu: dict[str, float]) -> tuple[str, str]:
    """A row of CPU milliseconds by role: the roles named in the figure's name, in order."""
    return f"{name} ({', '.join(cpu)})", ", ".join(str(ms) for ms in cpu.values())


def figures(results: dict[str, Any]) -> list[tuple[str, Any]]:
    """The headline numbers of each scenario that ran, as (name, value) rows."""
    rows: list[tuple[str, Any]] = []
    alone = dig(results, "cycles", "in_process")
    if alone:
        rows.append(("engine CPU ms per cycle in one process, no queue (statements, commits, flushes per cycle)",
                     f"{alone['cpu_ms_per_cycle']} ({alone['statements_per_cycle']}, {alone['commits_per_cycle']}, "
                     f"{alone['flushes_per_cycle']})"))
    for name, run in (dig(results, "cycles", "runs") or {}).items():
        rows.append((f"cycles/s, {name.replace('_', ' worker class, ')} worker(s) (park/s, settle/s, resume/s)",
                     f"{run['cycles_per_s']} ({run['park_per_s']}, {run['settle_per_s']}, {run['resume_per_s']})"))
        if run.get("cpu_ms_per_cycle"):
            rows.append(by_role(f"CPU ms per cycle, {name.replace('_', ' worker class, ')} worker(s)",
                                run["cpu_ms_per_cycle"]))
    for name, run in (dig(results, "langgraph", "runs") or {}).items():
        rows.append((f"LangGraph cycles/s, {name.replace('processes_', '')} process(es) (park/s, resume/s)",
                     f"{run['cycles_per_s']} ({run['park_per_s']}, {run['resume_per_s']})"))
        if run.get("cpu_ms_per_cycle"):
            rows.append(by_role(f"LangGraph CPU ms per cycle, {name.replace('processes_', '')} process(es)",
                                run["cpu_ms_per_cycle"]))
    for rate, run in (dig(results, "answer", "rates") or {}).items():
        done, web = run["answer_to_completed_ms"], run["response_ms"]
        rows.append((f"{dig(results, 'answer', 'click')} click -> turn.completed at {rate}/s, p50/p95/p99 ms "
                     f"(webhook p50/p99 ms; completed/sent, completed/s)",
                     f"{done['p50']}/{done['p95']}/{done['p99']} ({web['p50']}/{web['p99']}; "
                     f"{run['completed']}/{run['sent']}, {run['completed_per_s']})"))
        rows.append(by_role(f"CPU ms per click at {rate}/s", run["cpu_ms_per_click"]))
        if run.get("per_click"):
            rows.append(by_role(f"per click at {rate}/s", run["per_click"]))
    for count in (1, 2):
        floor = dig(results, "floor", f"consumers_{count}")
        if floor:
            rows.append((f"floor cycles/s, {count} consumer(s)", floor["cycles_per_s"]))
    floor_latency = dig(results, "floor", "latency")
    if floor_latency:
        f = floor_latency["click_to_done_ms"]
        rows.append((f"floor click -> done at {floor_latency['rate']}/s, p50/p95/p99 ms",
                     f"{f['p50']}/{f['p95']}/{f['p99']}"))
    for level, run in (dig(results, "scale", "levels") or {}).items():
        s, r, c = run["settle_ms"], run["settle_resume_ms"], run["control"]["settle_resume_ms"]
        rows.append((f"{level} parked: settle p50 ms, settle+resume p50/p95 ms (the control's, "
                     f"{dig(results, 'scale', 'control_parked')} parked, answered alternately)",
                     f"{s['p50']}, {r['p50']}/{r['p95']} ({c['p50']}/{c['p95']})"))
    cost = results.get("cost")
    if cost:
        rows.append(("bytes per parked turn (ours, LangGraph)",
                     f"{cost['bytes_per_parked_turn']}, "
                     f"{dig(results, 'langgraph', 'runs', 'processes_2', 'bytes_per_parked_thread') or '-'}"))
        for role, rss in cost["rss_kib"].items():
            rows.append((f"{role} RSS KiB before -> after {cost['parked']} parked",
                         f"{rss['before']} -> {rss['after']}"))
    return rows
