"""The web console's controls in a real browser: cancelling a turn, answering cards from the keyboard, editing an
approval's input, and reading a history longer than a page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import requests

from engine.defaults import HISTORY_TURNS
from engine.protocol import operator_principal
from engine.store.db import Database
from gateway.settings import Settings
from tests.browser.conftest import Shot, open_page, paste_key, serve, start_session
from tests.conftest import KEYS
from tests.support.agent import read_ledger, script
from tests.support.history import add_turns

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_cancel_a_waiting_turn_from_the_session_view(keyed_page: Any, keyed: str, shot: Shot) -> None:
    """bob, an operator, starts a turn in alice's session: alice sees it, but it is bob's turn to cancel."""
    page = keyed_page
    session = requests.post(f"{keyed}/api/sessions", json={}, headers={"Authorization": f"Bearer {KEYS['alice']}"},
                            timeout=10).json()
    started = requests.post(f"{keyed}/api/sessions/{session['id']}/input", json={"message": script([(
        "refund", {"charge_id": "ch_1", "amount": 7.0})], final="refunded")},
        headers={"Authorization": f"Bearer {KEYS['bob:operator']}"}, timeout=10)
    assert started.status_code == 202, started.text
    paste_key(page, KEYS["alice"])  # her session, but not her turn, and she is no operator
    page.goto(f"/#/sessions/{session['id']}")
    card = page.locator("article.card").last
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    cancel = page.get_by_role("button", name="Cancel turn")
    page.once("dialog", lambda dialog: dialog.dismiss())
    cancel.click()
    expect(cancel).to_be_enabled()
    page.once("dialog", lambda dialog: dialog.accept())
    cancel.click()
    expect(page.locator(".cancel-note")).to_have_text("refused: only bob or an operator may cancel this turn")
    approve = card.get_by_role("button", name="Approve")
    expect(approve).to_be_enabled()
    approve.focus()  # alice's answer from the keyboard is refused too: focus stays where she was
    page.keyboard.press("Enter")
    expect(card.locator(".card-notice")).to_contain_text("only bob may answer this request")  # (or the event says)
    expect(approve).to_be_focused()
    shot(page, "1-refused-for-alice")

    page.goto("/")
    page.locator("#key-panel summary").click()  # alice's key works: the box stays folded
    page.get_by_label("API key (kept in this browser only)").fill(KEYS["bob:operator"])
    page.get_by_role("button", name="Save").click()
    page.goto(f"/#/sessions/{session['id']}")
    card = page.locator("article.card").last
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(page.locator(".cancel-note")).to_be_hidden()
    page.once("dialog", lambda dialog: dialog.accept())
    page.get_by_role("button", name="Cancel turn").click()
    expect(card.locator(".outcome")).to_have_text("cancelled by bob")
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


def test_edit_an_approval_and_see_the_gateway_refuse_a_field(keyed_page: Any, keyed: str, shot: Shot) -> None:
    """alice corrects the amount; tags that are not a list are refused by the gateway, at their field."""
    page = keyed_page
    message = script([("adjustable_refund", {"charge_id": "ch_1", "amount": 200})], final="refunded")
    session = requests.post(f"{keyed}/api/sessions", json={"message": message},
                            headers={"Authorization": f"Bearer {KEYS['alice']}"}, timeout=10).json()
    paste_key(page, KEYS["alice"])
    page.goto(f"/#/sessions/{session['id']}")
    card = page.locator("article.card").last
    card.get_by_role("button", name="Edit").click()
    card.get_by_label("Amount").fill("20")
    card.get_by_label("Tags").fill('"vip"')
    card.get_by_role("button", name="Approve with changes").click()
    tags = card.get_by_label("Tags")
    expect(tags).to_have_accessible_description("Input should be a valid list")
    expect(tags).to_have_attribute("aria-invalid", "true")
    expect(card.locator(".card-notice")).to_contain_text("the edited input does not fit adjustable_refund: tags")
    shot(page, "1-refused")

    tags.fill('["vip"]')
    card.get_by_label("Currency").select_option("eur")
    card.get_by_role("button", name="Approve with changes").click()
    expect(card.locator(".outcome")).to_have_text(
        'approved by alice with changes: amount 200 -> 20, currency (unset) -> "eur", tags (unset) -> ["vip"]')
    expect(page.locator(".message.assistant").last).to_contain_text('"approval": "Approved by alice with changes')
    shot(page, "2-approved")
    assert [(e["amount"], e["currency"], e["tags"]) for e in read_ledger()] == [(20, "eur", ["vip"])]


def test_a_long_history_shows_its_latest_turns_and_the_earlier_ones_on_request(browser: Any, tmp_path: Path,
                                                                               shot: Shot) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", agent="gateway.demo:agent")
    for url in serve(settings):
        session = requests.post(f"{url}/api/sessions", json={}, timeout=10).json()
        database = Database(settings.database_url)
        add_turns(database, session["id"], HISTORY_TURNS + 1, operator_principal("local"))  # not 101 real turns
        database.dispose()
        for page in open_page(browser, url):
            page.goto(f"/#/sessions/{session['id']}")
            turns = page.locator(".history details.turn")
            expect(turns).to_have_count(HISTORY_TURNS)
            expect(turns.first.locator("summary")).to_have_text("Turn 2 · completed · question 2")
            expect(turns.last.locator("summary")).to_have_text("Turn 101 · completed · question 101")
            shot(page, "1-the-latest-turns")

            earlier = page.get_by_role("button", name="Show earlier turns")
            earlier.focus()
            page.keyboard.press("Enter")
            expect(turns).to_have_count(HISTORY_TURNS + 1)
            expect(turns.first.locator("summary")).to_have_text("Turn 1 · completed · question 1")
            expect(turns.first.locator("summary")).to_be_focused()
            expect(earlier).to_be_hidden()
            expect(page.locator(".session-head h2")).to_have_text("question 1")  # the session's first message

            page.get_by_label("Message").fill("hello")
            page.get_by_role("button", name="Send").click()  # a new turn: the latest page moves on, turn 2 stays
            expect(turns).to_have_count(HISTORY_TURNS + 2)
            expect(turns.nth(1).locator("summary")).to_have_text("Turn 2 · completed · question 2")
            expect(turns.last.locator("summary")).to_contain_text("Turn 102")
            shot(page, "2-every-turn-and-a-new-one")
