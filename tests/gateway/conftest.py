"""The gateway's fixtures: the CLI's (`hitl ...` in-process, over a SQLite file of the test's own, and the app
serving it), and each channel on PostgreSQL + Redis with a real `hitl worker`, for the tests of what the webhooks
take."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import defaults
from gateway.cli import main
from tests.conftest import TEST_AGENT, Stack, sqlite_settings
from tests.github.support import Github, github_stack
from tests.slack.conftest import slack_on_postgres
from tests.support.cli import Outcome
from tests.twilio.support import Sms, twilio_stack

__all__ = ["github_on_postgres", "slack_on_postgres", "sms_on_postgres"]


@pytest.fixture
def hitl(capsys: pytest.CaptureFixture[str]) -> Any:
    def run(*argv: str) -> Outcome:
        capsys.readouterr()
        code, message = 0, ""
        try:
            main(list(argv))
        except SystemExit as exc:
            if isinstance(exc.code, str):
                code, message = 1, exc.code
            else:
                code = exc.code or 0
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err, message)

    return run


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The CLI's environment: a SQLite file of its own, the test agent, no Redis."""
    database = tmp_path / "hitl.db"
    for name in ("REDIS_URL", "HITL_API_KEYS", "HITL_QUEUE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{database}")
    monkeypatch.setenv("HITL_AGENT", TEST_AGENT)
    return database


@pytest.fixture
def embedded(env: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stack]:
    """The app over the CLI's database (sqlite_settings names the same file), to set up conversations; the
    serving process the CLI hands resumed turns over to (it looks for them every 50 ms here)."""
    monkeypatch.setattr(defaults, "HAND_OVER_POLL_SECONDS", 0.05)
    built = Stack("sqlite", sqlite_settings(tmp_path))
    assert built.settings.database_url == os.environ["DATABASE_URL"]
    yield built
    built.close()


@pytest.fixture
def sms_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sms]:
    with twilio_stack(request, "postgres", tmp_path) as built:
        yield built


@pytest.fixture
def github_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Github]:
    with github_stack(request, "postgres", tmp_path) as built:
        yield built
