"""The console and a request of an agent that runs elsewhere (POST /api/requests): its session page shows the
request's card, answered like any other, and its history lists it after the turns (it belongs to none)."""

from __future__ import annotations

from typing import Any

import requests

from tests.browser.conftest import Shot

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_a_request_of_an_agent_elsewhere_is_answered_on_its_session_page(page: Any, embedded: str,
                                                                         shot: Shot) -> None:
    asked = requests.post(f"{embedded}/api/requests", timeout=10, json={
        "kind": "question", "prompt": "Which region should the refund bot use?",
        "options": [{"id": "eu", "label": "Europe"}, {"id": "us", "label": "United States"}]}).json()

    page.goto(f"/#/sessions/{asked['sessionId']}")
    card = page.locator("article.card").filter(has_text="Which region should the refund bot use?")
    expect(card.get_by_role("button", name="Europe", exact=True)).to_be_visible()
    shot(page, "1-asked")
    card.get_by_role("button", name="Europe", exact=True).click()

    expect(card.locator(".outcome")).to_have_text("answered by local: Europe")
    history = page.locator(".history")
    expect(history).to_contain_text("Requests of agents elsewhere")
    expect(history).to_contain_text("local: eu → allowed")
    shot(page, "2-answered")
