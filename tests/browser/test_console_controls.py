"""The web console's controls in a real browser: cancelling a turn, and answering cards from the keyboard."""

from __future__ import annotations

from typing import Any

import requests

from tests.browser.conftest import Shot, paste_key, start_session
from tests.support.agent import read_ledger, script

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_cancel_a_waiting_turn_from_the_session_view(keyed_page: Any, keyed: str, shot: Shot) -> None:
    page = keyed_page
    session = requests.post(f"{keyed}/api/sessions", json={"message": script([("refund", {"charge_id": "ch_1",
                            "amount": 7.0})], final="refunded")}, headers={"Authorization": "Bearer alice-key"},
                            timeout=10).json()
    paste_key(page, "bob-key")  # not alice's turn, and bob is no operator
    page.goto(f"/#/sessions/{session['id']}")
    card = page.locator("article.card").last
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    cancel = page.get_by_role("button", name="Cancel turn")
    page.once("dialog", lambda dialog: dialog.dismiss())
    cancel.click()
    expect(cancel).to_be_enabled()
    page.once("dialog", lambda dialog: dialog.accept())
    cancel.click()
    expect(page.locator(".cancel-note")).to_have_text("refused: only alice or an operator may cancel this turn")
    approve = card.get_by_role("button", name="Approve")
    expect(approve).to_be_enabled()
    approve.focus()  # bob's answer from the keyboard is refused too: focus stays where he was
    page.keyboard.press("Enter")
    expect(card.locator(".card-notice")).to_contain_text("only alice may answer this request")  # (or the event says)
    expect(approve).to_be_focused()
    shot(page, "1-refused-for-bob")

    page.goto("/")
    page.locator("#key-panel summary").click()  # bob's key works: the box stays folded
    page.get_by_label("API key (kept in this browser only)").fill("alice-key")
    page.get_by_role("button", name="Save").click()
    page.goto(f"/#/sessions/{session['id']}")
    card = page.locator("article.card").last
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(page.locator(".cancel-note")).to_be_hidden()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel turn").click()
    expect(card.locator(".outcome")).to_have_text("cancelled by alice")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(page.get_by_text("The turn was cancelled.")).to_be_visible()
    expect(page.locator(".tool").last).to_contain_text("cancelled")
    expect(page.locator(".history")).to_contain_text("Turn 1 · cancelled")
    expect(page.get_by_role("button", name="Cancel turn")).to_be_hidden()
    expect(page.locator(".session-head h2")).to_be_focused()  # not lost to the page with the button
    expect(page.locator(".session-head .status")).to_have_text("idle")
    shot(page, "2-cancelled")
    assert read_ledger() == []  # the refund never ran


def test_an_answer_from_the_keyboard_leaves_focus_on_the_outcome(page: Any, shot: Shot) -> None:
    card = start_session(page, "refund $11 on ch_1001")
    card.get_by_role("button", name="Approve").focus()
    page.keyboard.press("Enter")
    outcome = card.locator(".outcome")
    expect(outcome).to_have_text("approved by local")
    expect(outcome).to_be_focused()
    shot(page, "1-focused")


def test_enter_in_the_note_denies_with_it(page: Any, shot: Shot) -> None:
    card = start_session(page, "refund $12 on ch_1001")
    card.get_by_label("Note (optional)").fill("wrong charge")
    page.keyboard.press("Enter")
    outcome = card.locator(".outcome")
    expect(outcome).to_have_text("denied by local: wrong charge")
    expect(outcome).to_be_focused()
    expect(page.locator(".message.assistant").last).to_contain_text("wrong charge")
    shot(page, "1-denied")
