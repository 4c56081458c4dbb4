"""The console's cards follow a request that nobody answers: how often it reminded, when it escalated, and that it
is approved on timeout, then by nobody but the timeout (a gateway that sweeps every 0.3 s)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import expect

from gateway.settings import Settings
from tests.browser.conftest import Shot, open_page, paste_key, serve, start_session
from tests.conftest import API_KEYS, KEYS, TEST_AGENT
from tests.support.agent import script


@pytest.fixture(scope="module")
def swept(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("swept") / "hitl.db"
    yield from serve(Settings(database_url=f"sqlite:///{path}", agent=TEST_AGENT, api_keys=API_KEYS,
                              sweep_seconds=0.3))


@pytest.fixture
def swept_page(browser: Any, swept: str) -> Iterator[Any]:
    yield from open_page(browser, swept)


def test_a_card_says_how_often_it_reminded_when_it_escalated_and_that_the_timeout_approved_it(
    swept_page: Any, shot: Shot
) -> None:
    page = swept_page
    paste_key(page, KEYS["alice"])
    card = start_session(page, script([("nudged_refund", {"amount": 5.0})], final="refunded"))
    expect(card.locator(".follow-up")).to_have_text("reminded 2×")
    shot(page, "1-reminded-twice")

    card = start_session(page, script([("escalated_refund", {"amount": 40.0})], final="refunded"))
    expect(card.locator(".follow-up")).to_contain_text("escalated ")
    shot(page, "2-escalated")

    card = start_session(page, script([("lenient_refund", {"amount": 7.0})], final="refunded"))
    expect(card.locator("header .meta")).to_contain_text("then approved on timeout")
    expect(card.locator(".outcome")).to_have_text("approved on timeout")
    shot(page, "3-approved-on-timeout")
