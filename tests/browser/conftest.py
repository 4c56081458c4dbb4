"""The web console in a real browser: fixtures and helpers (Debian's chromium, headless, driven by Playwright).

Each test module gets its own gateways; every step leaves a screenshot in test-output/browser/ (or in the folder
HITL_SCREENSHOTS names). Skips when chromium or playwright is missing, unless HITL_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from gateway import stream
from gateway.app import create_app
from gateway.settings import Settings
from tests.conftest import API_KEYS, ROOT, TEST_AGENT
from tests.support.live_server import live_server
from tests.support.services import require_browser

try:
    from playwright.sync_api import expect, sync_playwright
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass

SHOTS = Path(os.environ.get("HITL_SCREENSHOTS") or ROOT / "test-output" / "browser")
LAUNCH_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
# Chromium logs every 4xx answer; 401 (no key yet), 403 (a refused response) and 422 (a refused edit) are part
# of the story.
EXPECTED = re.compile(r"Failed to load resource: the server responded with a status of (40[13]|422)\b")
Shot = Callable[[Any, str], None]


def serve(settings: Settings) -> Iterator[str]:
    app = create_app(settings)
    with pytest.MonkeyPatch.context() as patch, live_server(app) as url:
        patch.setattr(stream, "HEARTBEAT_SECONDS", 0.5)  # closed pages' streams end quickly at shutdown
        yield url
    app.extensions["hitl"].executor.shutdown()
    app.extensions["hitl"].db.dispose()


@pytest.fixture(scope="module")
def embedded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`hitl serve` as a newcomer runs it: the demo agent, SQLite, no API keys (loopback is the local operator)."""
    path = tmp_path_factory.mktemp("embedded") / "hitl.db"
    yield from serve(Settings(database_url=f"sqlite:///{path}", agent="gateway.demo:agent"))


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A gateway with HITL_API_KEYS and the test agent (its payout tool only bob may approve)."""
    path = tmp_path_factory.mktemp("keyed") / "hitl.db"
    yield from serve(Settings(database_url=f"sqlite:///{path}", agent=TEST_AGENT, api_keys=API_KEYS))


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    chromium = require_browser()
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium, args=LAUNCH_ARGS)
        yield launched
        launched.close()


def open_page(browser: Any, base_url: str) -> Iterator[Any]:
    """A fresh page; the test fails on any JavaScript error it logged."""
    expect.set_options(timeout=15_000)
    context = browser.new_context(base_url=base_url, viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda message: message.type == "error" and not EXPECTED.match(message.text)
            and errors.append(message.text))
    yield page
    context.close()
    assert not errors, f"the console logged errors: {errors}"


@pytest.fixture
def page(browser: Any, embedded: str) -> Iterator[Any]:
    yield from open_page(browser, embedded)


@pytest.fixture
def keyed_page(browser: Any, keyed: str) -> Iterator[Any]:
    yield from open_page(browser, keyed)


@pytest.fixture
def shot(request: pytest.FixtureRequest) -> Shot:
    """`shot(page, "1-step")` saves <SHOTS>/<test>/1-step.png."""
    folder = SHOTS / request.node.name

    def take(page: Any, step: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(folder / f"{step}.png"), full_page=True)

    return take


def start_session(page: Any, message: str) -> Any:
    page.goto("/")
    page.get_by_label("Start a session with the agent").fill(message)
    page.get_by_role("button", name="Start").click()
    return page.locator("article.card").last


def paste_key(page: Any, key: str) -> None:
    page.goto("/")
    page.get_by_label("API key (kept in this browser only)").fill(key)
    page.get_by_role("button", name="Save").click()


def approve_through_the_api(base_url: str, session_id: str, headers: dict[str, str] | None = None) -> None:
    """Somebody else approves the session's one pending request, outside this page."""
    inbox = requests.get(f"{base_url}/api/requests", params={"status": "pending", "sessionId": session_id},
                         headers=headers, timeout=10)
    [pending] = inbox.json()["requests"]
    answer = requests.patch(f"{base_url}/api/requests/{pending['requestId']}", json={"optionId": "approve"},
                            headers=headers, timeout=10)
    assert answer.status_code == 200, answer.text
