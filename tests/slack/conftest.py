"""Slack tests run against a gateway whose Slack Web API is a local fake (tests/support/fake_slack.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.slack.workspace import Workspace, shared_fake, workspace
from tests.support.fake_slack import FakeSlack


@pytest.fixture
def fake(request: pytest.FixtureRequest) -> FakeSlack:
    found = shared_fake(request)
    found.reset()
    return found


@pytest.fixture
def slack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """A gateway on SQLite with in-process jobs, Slack configured against the fake."""
    with workspace(request, "sqlite", tmp_path) as built:
        yield built


@pytest.fixture
def slack_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    """The same on PostgreSQL + Redis, its jobs run by a real `hitl worker` process."""
    with workspace(request, "postgres", tmp_path) as built:
        yield built
