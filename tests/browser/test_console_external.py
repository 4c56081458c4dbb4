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


def test_an_editable_request_of_an_agent_elsewhere_is_edited_on_the_console_and_checked_by_its_schema(
        page: Any, embedded: str, shot: Shot) -> None:
    asked = requests.post(f"{embedded}/api/requests", timeout=10, json={
        "kind": "tool-approval", "editable": True, "prompt": "Refund the customer?",
        "action": {"toolName": "refund_charge", "input": {"charge": "ch_1", "amount": 200}, "inputSchema": {
            "$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
            "definitions": {"speed": {"enum": ["normal", "rush"]}},
            "properties": {"charge": {"type": "string", "title": "Charge"},
                           "amount": {"type": "number", "maximum": 100, "title": "Amount"},
                           "speed": {"$ref": "#/definitions/speed", "title": "Speed"}}}}}).json()

    page.goto(f"/#/sessions/{asked['sessionId']}")
    card = page.locator("article.card").filter(has_text="Refund the customer?")
    card.get_by_role("button", name="Edit").click()
    amount = card.get_by_label("Amount")
    amount.fill("500")
    card.get_by_role("button", name="Approve with changes").click()
    expect(amount).to_have_accessible_description("500 is greater than the maximum of 100")
    expect(amount).to_have_attribute("aria-invalid", "true")
    shot(page, "1-refused")

    amount.fill("20")
    card.get_by_label("Speed").select_option("rush")
    card.get_by_role("button", name="Approve with changes").click()
    expect(card.locator(".outcome")).to_have_text('approved by local with changes: amount 200 -> 20, '
                                                  'speed (unset) -> "rush"')
    shot(page, "2-approved")
    closed = requests.get(f"{embedded}/api/requests/{asked['requestId']}", timeout=10).json()
    assert closed["response"]["input"] == {"charge": "ch_1", "amount": 20, "speed": "rush"}
