"""The GitHub channel on SQLite with in-process jobs, GitHub's REST API mocked in-process with `responses`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import responses

from gateway.settings import Settings
from tests.conftest import API_KEYS, TEST_AGENT, Stack
from tests.github.fake_github import FakeGithub, mount
from tests.github.support import BOT, TOKEN, Github, github_settings

API_URL = "https://ghe.example.test/api/v3"
"""A GitHub Enterprise URL (with its /api/v3 path), as GITHUB_API_URL."""


@contextmanager
def github_in_process(tmp_path: Path, agent: str = TEST_AGENT, **settings: str) -> Iterator[Github]:
    fake = FakeGithub(TOKEN, BOT)
    with responses.RequestsMock(assert_all_requests_are_fired=False) as mock:
        mount(fake, mock, API_URL)
        stack = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", agent=agent,
                                         api_keys=API_KEYS, **{**github_settings(API_URL), **settings}))
        try:
            yield Github(stack, fake)
        finally:
            stack.close()


@pytest.fixture
def github(tmp_path: Path) -> Iterator[Github]:
    with github_in_process(tmp_path) as built:
        yield built
