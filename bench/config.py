"""Sizes of a run (full, or `--quick` for the smoke test) and the context every scenario gets."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from sqlalchemy.engine import make_url

from . import slack
from .stack import Deployment, Process, Target, drop_database, migrated_database, truncate_engine_tables


@dataclass(frozen=True)
class Sizes:
    cycles: int
    """Turns per cycle-throughput run (scenario 1)."""
    rates: tuple[int, ...]
    """Open-loop click rates per second (scenario 2)."""
    rate_seconds: float
    """How long each rate is held."""
    drain_seconds: float
    """How long to wait, after the last click of a rate, for its turns to complete."""
    scale_levels: tuple[int, ...]
    """Parked turns in the database while scenario 3 samples settle+resume latency."""
    scale_samples: int
    """Settle+resume samples per level."""
    cost_parked: int
    """Parked turns whose storage and memory cost scenario 4 measures."""
    warm_cycles: int
    """Answer-to-completion cycles that warm the processes up before memory is read."""
    peer_threads: int
    """LangGraph threads (scenario 5a)."""
    floor_items: int
    """Items the floor pushes through as fast as it can (scenario 5b)."""
    sweep_seconds: float = 10.0
    """How often each `hitl worker` sweeps (the deployment default; shorter in quick runs)."""
    stats_seconds: float = 10.5
    """How long the answer scenario waits before it reads PostgreSQL's transaction count: PostgreSQL 15 and later
    report an idle connection's statistics after 10 s (no wait in quick runs, whose counts are only smoke)."""
    floor_rate: int = 20
    """Open-loop rate of the floor's latency run: the rate the click-to-completion p50 target is set at
    (report.LOW_RATE)."""


FULL = Sizes(cycles=500, rates=(20, 50, 100, 200), rate_seconds=10.0, drain_seconds=120.0,
             scale_levels=(1000, 10000, 100000), scale_samples=100, cost_parked=10000, warm_cycles=20,
             peer_threads=1000, floor_items=2000)
QUICK = Sizes(cycles=4, rates=(20, 100, 200), rate_seconds=0.1, drain_seconds=20.0, scale_levels=(50, 200),
              scale_samples=3, cost_parked=100, warm_cycles=2, peer_threads=8, floor_items=30, sweep_seconds=2.0,
              stats_seconds=0.0)


@dataclass
class Bench:
    """What a scenario runs against; `deployment()` starts the fake Slack Web API (for Slack clicks),
    gunicorn and the workers on first use."""

    target: Target
    server_url: str
    """The PostgreSQL server's base URL (LangGraph gets a database of its own there)."""
    sizes: Sizes
    workers: int
    worker_class: str
    click: str
    """What a click in scenario 2 is: `slack` (a signed block_actions) or `rest` (PATCH /api/requests/<id>)."""
    slack_api_url: str = ""
    _fake_slack: Process | None = None
    _deployment: Deployment | None = None

    def deployment(self) -> Deployment:
        if self._deployment is None:
            extra = {}
            if self.click == "slack":
                self._fake_slack, self.slack_api_url = slack.start_fake(self.target)
                extra = slack.env(self.slack_api_url)
            self._deployment = Deployment(self.target, self.sizes.sweep_seconds, extra)
            self._start(self._deployment)
        return self._deployment

    def _start(self, deployment: Deployment) -> None:
        deployment.start_web()
        deployment.start_workers(self.workers, self.worker_class)

    @contextmanager
    def control(self) -> Iterator[Deployment]:
        """A second deployment of the same shape (gunicorn, the same workers; no Slack) on a database and queue
        of its own, started afresh; stopped, and its database dropped, on exit."""
        name = f"{make_url(self.target.database_url).database}_control"
        logs = self.target.logs / "control"
        logs.mkdir(exist_ok=True)
        target = Target(migrated_database(self.server_url, name), self.target.redis_url,
                        f"{self.target.queue}-control", logs)
        deployment = Deployment(target, self.sizes.sweep_seconds)
        try:
            self._start(deployment)
            yield deployment
        finally:
            deployment.close()
            drop_database(self.server_url, name)

    def fresh_deployment(self) -> Deployment:
        """The deployment, with no job left over from an earlier scenario, on empty tables."""
        deployment = self.deployment()
        deployment.quiesce()
        truncate_engine_tables(self.target)
        return deployment

    def close(self) -> None:
        if self._deployment is not None:
            self._deployment.close()
            self._deployment = None
        if self._fake_slack is not None:
            self._fake_slack.stop()
            self._fake_slack = None
