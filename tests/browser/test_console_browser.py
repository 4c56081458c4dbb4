"""The web console in a real browser: Debian's chromium, headless, driven by Playwright (tests/browser/conftest.py).

Each step leaves a screenshot in test-output/browser/. Skips when chromium or playwright is missing, unless
HITL_REQUIRE_SERVICES=1.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from gateway.schemas import PAGE
from gateway.settings import Settings
from tests.browser.conftest import Shot, approve_through_the_api, open_page, paste_key, serve, start_session
from tests.conftest import KEYS
from tests.support.agent import script

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_approve_a_refund_and_read_the_history(page: Any, shot: Shot) -> None:
    card = start_session(page, "refund $20 on ch_1001")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    expect(page.locator("#acting-as")).to_have_text("Acting as local (operator)")  # no keys: loopback operates
    expect(card).to_contain_text("Approve refund charge?")
    expect(card).to_contain_text("asked by local")
    expect(card.locator(".action")).to_contain_text('"charge_id": "ch_1001"')
    shot(page, "1-approval-card")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".outcome")).to_have_text("approved by local")
    expect(card.get_by_role("button")).to_have_count(0)
    expect(page.locator(".message.assistant").last).to_contain_text("Refunded 20.00 on ch_1001")
    history = page.locator(".history")
    expect(history).to_contain_text("Run 1 paused for input")  # it waited for a person; nothing went wrong
    expect(history).not_to_contain_text("interrupted")
    expect(history).to_contain_text("Run 2 succeeded")
    expect(history).to_contain_text("local: approve → allowed")
    shot(page, "2-approved")


def test_deny_a_refund_with_a_note_from_the_keyboard(page: Any, shot: Shot) -> None:
    card = start_session(page, "refund $30 on ch_1003")
    card.get_by_label("Note (optional)").fill("too expensive")
    page.keyboard.press("Tab")
    expect(card.get_by_role("button", name="Deny")).to_be_focused()
    shot(page, "1-note-typed")
    page.keyboard.press("Enter")
    expect(card.locator(".outcome")).to_have_text("denied by local: too expensive")
    expect(page.locator(".message.assistant").last).to_contain_text("too expensive")
    expect(page.locator(".tool").last).to_contain_text("rejected")
    shot(page, "2-denied")


def test_answer_a_question_from_its_buttons_which_show_each_option_s_description(page: Any, shot: Shot) -> None:
    card = start_session(page, "upgrade my plan")
    expect(card).to_contain_text("Which plan?")
    pro = card.get_by_role("button", name="Pro", exact=True)
    expect(pro).to_have_accessible_description("$29 a month, five seats")
    expect(card.get_by_text("talk to sales")).to_be_visible()  # every option's description, without opening a menu
    expect(card.get_by_role("combobox")).to_have_count(0)
    expect(card.get_by_label("Or type an answer")).to_be_visible()
    shot(page, "1-question")
    pro.click()
    expect(card.locator(".outcome")).to_have_text("answered by local: Pro")
    expect(page.locator(".message.assistant").last).to_contain_text("you are on the Pro plan now")
    shot(page, "2-answered")


def test_the_inbox_answers_in_place_and_a_session_page_follows_answers_given_elsewhere(
    page: Any, embedded: str, shot: Shot
) -> None:
    requests.post(f"{embedded}/api/sessions", json={"message": "refund $5 on ch_1002"}, timeout=10)
    second = requests.post(f"{embedded}/api/sessions", json={"message": "refund $6 on ch_1002"}, timeout=10).json()
    page.goto("/#/inbox")
    card = page.locator("article.card").filter(has_text='"amount": 5')
    expect(card.get_by_role("link", name="refund $5 on ch_1002")).to_be_visible()
    expect(card.locator(".session-line .meta")).to_have_text("gateway.demo:agent · API")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    shot(page, "1-inbox")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".outcome")).to_have_text("approved by local")

    page.goto(f"/#/sessions/{second['id']}")
    live = page.locator("article.card").last
    expect(live.get_by_role("button", name="Approve")).to_be_visible()
    approve_through_the_api(embedded, second["id"])
    expect(live.locator(".outcome")).to_have_text("approved by local")  # over the event stream, no reload
    expect(page.locator(".message.assistant").last).to_contain_text("Refunded 6.00 on ch_1002")
    shot(page, "2-answered-elsewhere")


@pytest.fixture
def crowded(tmp_path: Any) -> Iterator[str]:
    """The embedded gateway with one more refund waiting than the inbox's page holds."""
    for url in serve(Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", agent="gateway.demo:agent")):
        for n in range(PAGE + 1):
            requests.post(f"{url}/api/sessions", json={"message": f"refund ${n + 1} on ch_1001"}, timeout=10)
        deadline = time.monotonic() + 60
        while len(requests.get(f"{url}/api/requests", params={"status": "pending", "limit": PAGE + 1},
                               timeout=10).json()["requests"]) <= PAGE:  # the turns park in the background
            assert time.monotonic() < deadline, "the refunds did not all park"
            time.sleep(0.2)
        yield url


def test_lists_longer_than_a_page_show_one_and_say_more_wait(
    browser: Any, crowded: str, shot: Shot
) -> None:
    oldest = requests.get(f"{crowded}/api/requests", params={"status": "pending", "limit": PAGE + 1},
                          timeout=10).json()["requests"]
    for page in open_page(browser, crowded):
        page.goto("/#/inbox")
        cards = page.locator("article.card")
        expect(cards).to_have_count(PAGE)
        expect(page.locator("#inbox-count")).to_have_text(f"{PAGE}+")
        more = page.get_by_text("More requests are waiting")
        expect(more).to_be_visible()
        shot(page, "1-a-page-of-the-oldest")
        cards.first.get_by_role("button", name="Approve").click()
        expect(cards.first.locator(".outcome")).to_have_text("approved by local")
        expect(cards).to_have_count(PAGE + 1)  # the next oldest joins at the next refresh
        expect(cards.last.get_by_role("link", name=oldest[PAGE]["title"], exact=True)).to_have_attribute(
            "href", f"#/sessions/{oldest[PAGE]['sessionId']}")
        expect(more).to_be_hidden()
        expect(page.locator("#inbox-count")).to_have_text(str(PAGE))
        shot(page, "2-the-next-joined")

        page.goto("/#/")  # one session per refund: a page of them too
        sessions = page.locator("ul.sessions > li")
        expect(sessions).to_have_count(PAGE)
        older = page.get_by_role("button", name="Show older sessions")
        older.click()
        expect(sessions).to_have_count(PAGE + 1)
        expect(older).to_be_hidden()
        shot(page, "3-older-sessions")


def test_with_api_keys_a_refused_answer_shows_the_policy_reason(keyed_page: Any, keyed: str, shot: Shot) -> None:
    page = keyed_page
    page.goto("/")
    expect(page.get_by_label("API key (kept in this browser only)")).to_be_visible()  # asked for after a 401
    page.get_by_label("API key (kept in this browser only)").fill(KEYS["alice"])
    page.get_by_role("button", name="Save").click()
    card = start_session(page, script([("payout", {"amount": 50.0})], final="paid"))
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".card-notice")).to_contain_text("only bob may approve payouts")
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    shot(page, "1-refused")
    session_id = page.url.rsplit("/", 1)[1]
    approve_through_the_api(keyed, session_id, {"Authorization": f"Bearer {KEYS['bob:operator']}"})
    expect(card.locator(".outcome")).to_have_text("approved by bob")
    shot(page, "2-approved-by-bob")


def test_a_narrow_window_keeps_long_words_and_the_card_controls_on_screen(
    keyed_page: Any, shot: Shot
) -> None:
    page = keyed_page
    page.set_viewport_size({"width": 375, "height": 800})
    paste_key(page, KEYS["alice"])
    charge = "ch_" + "8f3a9c2e" * 16  # one long word, as links and ids are, and one long line of JSON
    card = start_session(page, script([("refund", {"charge_id": charge, "amount": 5.0})], final="refunded"))
    deny = card.get_by_role("button", name="Deny")
    expect(deny).to_be_visible()
    expect(page.locator(".history")).to_contain_text("Approve refund?")
    shot(page, "1-narrow")
    assert page.evaluate("document.documentElement.scrollWidth") <= 375  # nothing to scroll sideways for
    box = deny.bounding_box()
    assert box is not None and box["x"] + box["width"] <= 375, box


def test_a_message_that_waits_for_the_turn_says_so_until_its_turn_starts(
    keyed_page: Any, keyed: str, shot: Shot
) -> None:
    page = keyed_page
    alice = {"Authorization": f"Bearer {KEYS['alice']}"}
    session = requests.post(f"{keyed}/api/sessions", json={"message": script([("refund", {"charge_id": "ch_1",
                            "amount": 3.0})], final="refunded")}, headers=alice, timeout=10).json()
    paste_key(page, KEYS["bob:operator"])  # an operator: he sees alice's session
    page.goto(f"/#/sessions/{session['id']}")
    expect(page.locator("article.card").last.get_by_role("button", name="Approve")).to_be_visible()
    page.get_by_label("Message").fill("bob here: ping me when it is done")
    page.get_by_role("button", name="Send").click()
    note = page.locator(".composer-note")
    expect(note).to_have_text("Queued: your message starts the next turn once this one ends.")
    shot(page, "1-queued")
    approve_through_the_api(keyed, session["id"], alice)
    expect(page.locator(".message.user").last).to_contain_text("bob here: ping me when it is done")
    expect(note).to_be_hidden()
    shot(page, "2-its-turn-started")


def test_an_error_page_from_a_proxy_is_named_not_swallowed(page: Any, shot: Shot) -> None:
    card = start_session(page, "refund $8 on ch_1001")
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    # A reverse proxy over HTTP/2 whose upstream is down: an HTML 502, and HTTP/2 has no reason phrase.
    page.evaluate("""() => {
        const real = window.fetch;
        window.fetch = (path, init) => init && init.method === "PATCH"
            ? Promise.resolve(new Response("<html>Bad gateway</html>", { status: 502 }))
            : real(path, init);
    }""")
    card.get_by_role("button", name="Approve").click()
    expect(card.locator(".card-notice")).to_have_text("The gateway answered 502 without saying why; try again.")
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    shot(page, "1-named")


def unreachable(page: Any) -> None:
    """The gateway restarting: every call fails as fetch fails when nothing listens, until reachable(page)."""
    page.evaluate("""() => {
        window.realFetch = window.fetch;
        window.fetch = () => Promise.reject(new TypeError("Failed to fetch"));
    }""")


def reachable(page: Any) -> None:
    page.evaluate("() => { window.fetch = window.realFetch; }")


def test_a_session_opened_while_the_gateway_is_unreachable_loads_once_it_answers(
    page: Any, embedded: str, shot: Shot
) -> None:
    requests.post(f"{embedded}/api/sessions", json={"message": "refund $9 on ch_1002"}, timeout=10)
    page.goto("/")
    unreachable(page)
    page.get_by_role("link", name="refund $9 on ch_1002").click()
    expect(page.locator(".session-head .status")).to_have_text("Failed to fetch")
    shot(page, "1-unreachable")
    reachable(page)
    expect(page.locator("article.card").last.get_by_role("button", name="Approve")).to_be_visible()
    expect(page.locator(".session-head .live")).to_have_text("live")
    expect(page.locator(".message.user")).to_have_count(1)
    shot(page, "2-loaded")


def test_the_inbox_says_when_the_gateway_is_unreachable_and_stops_once_it_answers(page: Any, shot: Shot) -> None:
    page.goto("/#/inbox")  # the session list refreshes, fails and recovers through the same code
    expect(page.locator("h2")).to_be_focused()
    unreachable(page)
    notice = page.locator("#notice")
    expect(notice).to_have_text("Failed to fetch")  # at the next refresh
    shot(page, "1-unreachable")
    reachable(page)
    expect(notice).to_be_hidden()
    shot(page, "2-reachable")


def test_a_typed_answer_the_policy_could_not_judge_is_told_on_the_card(keyed_page: Any, shot: Shot) -> None:
    page = keyed_page
    paste_key(page, KEYS["alice"])
    card = start_session(page, script([("audited_refund", {"amount": 12.0})], final="refunded"))
    expect(card.get_by_role("button", name="Approve")).to_be_visible()
    page.get_by_label("Message").fill("approve")  # a typed reply: its verdict comes over the event stream
    page.get_by_label("Message").press("Enter")
    expect(card.locator(".card-notice")).to_have_text(
        "refused for alice: the response policy failed: ConnectionError")
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    shot(page, "1-told")


def test_a_typed_answer_the_policy_keeps_waiting_on_says_so(keyed_page: Any, keyed: str, shot: Shot) -> None:
    page = keyed_page
    paste_key(page, KEYS["alice"])
    start_session(page, script([("wire_transfer", {"amount": 40.0})], final="sent"))
    expect(page.locator("article.card").last.get_by_role("button", name="Approve")).to_be_visible()
    page.get_by_label("Message").fill("approve")  # the two-person rule keeps alice's answer pending
    page.get_by_label("Message").press("Enter")
    note = page.locator(".composer-note")
    expect(note).to_have_text("Recorded; the response policy waits for more answers.")
    shot(page, "1-recorded")
    approve_through_the_api(keyed, page.url.rsplit("/", 1)[1], {"Authorization": f"Bearer {KEYS['bob:operator']}"})
    expect(page.locator(".message.assistant").last).to_contain_text("sent")
    expect(note).to_be_hidden()
    shot(page, "2-settled")


def test_an_approval_that_takes_two_people_shows_the_count_then_both(keyed_page: Any, keyed: str, shot: Shot) -> None:
    page = keyed_page
    paste_key(page, KEYS["alice"])
    card = start_session(page, script([("pair_release", {"version": "9.0"})], final="released"))

    card.get_by_role("button", name="Approve").click()

    expect(card.locator(".follow-up")).to_have_text("1 of 2 approvals: alice")
    expect(card.get_by_role("button", name="Approve")).to_be_enabled()
    shot(page, "1-one-of-two")
    operator = {"Authorization": f"Bearer {KEYS['bob:operator']}"}  # (a user's key sees only what it is asked)
    approve_through_the_api(keyed, page.url.rsplit("/", 1)[1], operator)
    expect(card.locator(".outcome")).to_have_text("approved by alice, bob")
    expect(page.locator(".message.assistant").last).to_contain_text("released")
    shot(page, "2-approved")


def test_the_key_box_asks_for_a_key_and_says_when_one_is_wrong(keyed_page: Any, shot: Shot) -> None:
    page = keyed_page
    page.goto("/")
    notice = page.locator("#notice")
    expect(notice).to_have_text("This gateway needs an API key: paste one under “API key”.")
    shot(page, "1-asked")
    paste_key(page, "not-a-key")
    expect(notice).to_have_text("The gateway refused this API key: paste a valid one under “API key”.")
    expect(page.get_by_label("API key (kept in this browser only)")).to_be_visible()
    shot(page, "2-wrong-key")
    expect(page.locator("#acting-as")).to_be_hidden()
    paste_key(page, KEYS["alice"])
    expect(notice).to_be_hidden()
    expect(page.locator("#acting-as")).to_have_text("Acting as alice (user)")
    expect(page.get_by_text("No sessions yet.").or_(page.locator("ul.sessions > li").first)).to_be_visible()
