"""The reliability suite (docs/reliability.md): PostgreSQL, Redis and real `hitl worker` processes, with the three
channels configured against their fake platforms.

The suite's database is its own: no worker of another test sweeps it, and `pg_terminate_backend` on it reaches
only this suite's connections. Each test has a queue of its own. Workers are forked from a warm parent
(tests/support/workers.py), so a test can kill and replace many.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from gateway.settings import Settings
from tests.conftest import (
    API_KEYS,
    ROOT,
    TEST_AGENT,
    Stack,
    WorkerProcess,
    fresh_database,
    truncate_all,
    worker_env,
)
from tests.github.support import github_settings
from tests.github.support import shared_server as github_server
from tests.slack.workspace import shared_fake as slack_fake
from tests.slack.workspace import slack_settings
from tests.support.faults import ARMED
from tests.support.workers import WorkerForge
from tests.twilio.support import fake_twilio, twilio_settings

LATER = {
    "sessions": ("delivery_lease_until",),
    "turns": ("lease_until", "updated_at"),
    "outbox": ("available_at", "created_at"),
    "inbound": ("received_at",),
}
"""The times the sweep compares with now: leases, and how long a job or an item has waited (sessions before turns:
the order in which every writer locks them)."""
CHANNEL_VARIABLES = ("SLACK_", "TWILIO_", "GITHUB_", "PUBLIC_BASE_URL")


@pytest.fixture(scope="session")
def reliability_url() -> Iterator[str]:
    with fresh_database("hitl_rel") as url:
        yield url


@pytest.fixture(scope="session")
def forge() -> Iterator[WorkerForge]:
    built = WorkerForge(ROOT, dict(os.environ, PYTHONPATH=str(ROOT)))
    yield built
    built.close()


class Deployment:
    """One test's gateway: the web side (`stack`, in this process) and its `hitl worker`s, on a queue of its own,
    with Slack, Twilio and GitHub configured against the fake platforms."""

    def __init__(self, request: pytest.FixtureRequest, tmp_path: Path, redis_url: str) -> None:
        self.url: str = request.getfixturevalue("reliability_url")
        self.forge: WorkerForge = request.getfixturevalue("forge")
        self.tmp_path = tmp_path
        self.faults = tmp_path / "armed-fault"
        self.slack, self.twilio, self.github = slack_fake(request), fake_twilio(request), github_server(request)
        self.slack.reset()
        self.twilio.reset()
        self.github.fake.reset()
        truncate_all(self.url)
        queue = f"rel-{uuid.uuid4().hex[:12]}"
        channels = {**slack_settings(self.slack), **twilio_settings(self.twilio.url),
                    **github_settings(self.github.url)}
        settings = Settings(database_url=self.url, redis_url=redis_url, queue=queue, agent=TEST_AGENT,
                            api_keys=API_KEYS, **channels)
        self.stack = Stack("postgres", settings)
        self.env = worker_env(self.url, redis_url, queue, HITL_SWEEP_SECONDS="3600", **{ARMED: str(self.faults)},
                              **channel_env(settings))
        self.workers: list[WorkerProcess] = []

    def start_worker(self) -> WorkerProcess:
        """A new `hitl worker`; it sweeps only when the test does (`sweep()`)."""
        worker = WorkerProcess(self.env, self.tmp_path / f"worker-{len(self.workers)}.log", self.forge)
        self.workers.append(worker)
        return worker

    def later(self, seconds: float) -> None:
        """`seconds` pass, as far as the sweep can tell: every lease and wait it compares with now is moved back
        (cheaper than waiting out the 30 s lease of a turn, the 60 s of a delivery, or the outbox's 30 s). Only
        while no worker runs anything: a live runner's lease would run out too."""
        with self.stack.rt.db.engine.begin() as conn:
            for table, columns in LATER.items():
                moved = ", ".join(f"{c} = {c} - make_interval(secs => :seconds)" for c in columns)
                conn.execute(text(f"UPDATE {table} SET {moved}"), {"seconds": seconds})

    def close(self) -> None:
        for worker in self.workers:
            if worker.proc.poll() is None:
                worker.kill(15)
        self.slack.release()
        self.stack.close()


def channel_env(settings: Settings) -> dict[str, str]:
    """The environment variables that give a worker the channel settings of `settings`."""
    env = {}
    for name, field in Settings.model_fields.items():
        value, variable = getattr(settings, name), field.validation_alias
        if value is not None and isinstance(variable, str) and variable.startswith(CHANNEL_VARIABLES):
            env[variable] = ",".join(value) if isinstance(value, list) else str(value)
    return env


@contextlib.contextmanager
def deployment(request: pytest.FixtureRequest, tmp_path: Path, redis_url: str) -> Iterator[Deployment]:
    built = Deployment(request, tmp_path, redis_url)
    try:
        yield built
    finally:
        built.close()


@pytest.fixture
def deployed(request: pytest.FixtureRequest, tmp_path: Path, redis_url: str) -> Iterator[Deployment]:
    """A deployment on the machine's Redis, with one worker."""
    with deployment(request, tmp_path, redis_url) as built:
        built.start_worker()
        yield built
