"""The console names the person behind a linked principal: "approved by Alice Ng via the API" (a gateway of its
own: the people linked here change how its other pages would name alice)."""

from __future__ import annotations

from typing import Any

import requests

from tests.browser.conftest import Shot, paste_key, start_session
from tests.conftest import KEYS
from tests.support.agent import script

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_an_answer_from_a_linked_key_names_the_person(keyed_page: Any, keyed: str, shot: Shot) -> None:
    linked = requests.post(f"{keyed}/api/people", json={"name": "alice", "displayName": "Alice Ng",
                                                        "principals": ["slack:T1:U1", "alice"]},
                           headers={"Authorization": f"Bearer {KEYS['bob:operator']}"}, timeout=10)
    assert linked.status_code == 201, linked.text
    paste_key(keyed_page, KEYS["alice"])
    card = start_session(keyed_page, script([("refund", {"charge_id": "ch_1001", "amount": 20})], final="refunded"))
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".outcome")).to_have_text("approved by Alice Ng via the API")
    expect(keyed_page.locator(".history")).to_contain_text("Alice Ng via the API: approve → allowed")
    shot(keyed_page, "1-approved-by-the-person")


def test_a_request_not_shown_to_a_person_github_alone_knows_says_so_under_its_card(
        keyed_page: Any, keyed: str, shot: Shot) -> None:
    linked = requests.post(f"{keyed}/api/people", json={"name": "manager", "principals": ["github:1002"]},
                           headers={"Authorization": f"Bearer {KEYS['bob:operator']}"}, timeout=10)
    assert linked.status_code == 201, linked.text
    paste_key(keyed_page, KEYS["alice"])
    card = start_session(keyed_page, script([("managed_refund", {"amount": 120})], final="refunded"))
    expect(card).to_contain_text("Approve managed refund?")  # it opened all the same
    notes = keyed_page.locator(".timeline .note.error")
    expect(notes.filter(has_text="Not shown to manager: no configured channel can write to 'manager' on their own "
                                 "(github:1002); GitHub has no direct messages")).to_have_count(1)
    expect(notes.filter(has_text="is not configured")).to_have_count(1)  # nor at the Slack channel: no Slack here
    shot(keyed_page, "2-not-shown-to-the-manager")
