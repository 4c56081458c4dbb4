"""Each channel on PostgreSQL + Redis with a real `hitl worker`, for the tests of what the webhooks take."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.github.support import Github, github_stack
from tests.slack.conftest import slack_on_postgres
from tests.twilio.support import Sms, twilio_stack

__all__ = ["github_on_postgres", "slack_on_postgres", "sms_on_postgres"]


@pytest.fixture
def sms_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sms]:
    with twilio_stack(request, "postgres", tmp_path) as built:
        yield built


@pytest.fixture
def github_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Github]:
    with github_stack(request, "postgres", tmp_path) as built:
        yield built
