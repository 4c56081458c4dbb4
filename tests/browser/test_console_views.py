"""What the console shows, in a real browser at a desktop's and a phone's width: session titles, agents and
channels in the lists, inbox cards that say where they are from, questions as buttons or a menu, and the inbox
badge following the event stream. Screenshots of each view at both widths go to test-output/browser/."""

from __future__ import annotations

import time
from typing import Any

import requests

from tests.browser.conftest import Shot, paste_key, start_session
from tests.conftest import KEYS
from tests.support.agent import script

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass

WIDTHS = (1280, 390)  # a laptop, a phone
REFUND = "refund $20 on ch_1001: the customer says the annual plan was charged twice in March, please check"


def pending(base_url: str) -> list[dict[str, Any]]:
    answer = requests.get(f"{base_url}/api/requests", params={"status": "pending"}, timeout=10)
    return list(answer.json()["requests"])


def start(base_url: str, message: str) -> str:
    return str(requests.post(f"{base_url}/api/sessions", json={"message": message}, timeout=10).json()["id"])


def parked(base_url: str, count: int) -> list[dict[str, Any]]:
    """The pending requests, once there are `count` (the turns park in the background)."""
    deadline = time.monotonic() + 30
    while len(waiting := pending(base_url)) < count:
        assert time.monotonic() < deadline, f"{count} requests did not open"
        time.sleep(0.1)
    return waiting


def fits(page: Any, width: int) -> None:
    """Nothing to scroll sideways for."""
    assert page.evaluate("document.documentElement.scrollWidth") <= width


def test_the_lists_and_a_session_say_what_each_session_is_at_a_desktop_s_and_a_phone_s_width(
    page: Any, embedded: str, shot: Shot
) -> None:
    refund = start(embedded, REFUND)
    start(embedded, "upgrade my plan")
    start(embedded, "look up ch_1002")
    parked(embedded, 2)
    title = REFUND[:79] + "…"  # the first message, cut
    for width in WIDTHS:
        page.set_viewport_size({"width": width, "height": 900})
        page.goto("/")
        rows = page.locator("ul.sessions > li")
        expect(rows).to_have_count(3)
        row = rows.filter(has=page.get_by_role("link", name=title, exact=True))
        expect(row.locator(".meta")).to_contain_text("gateway.demo:agent · API · active · started")
        expect(row).to_contain_text("1 open request")
        expect(rows.filter(has_text="look up ch_1002").locator(".meta")) \
            .to_contain_text("gateway.demo:agent · API · idle")
        fits(page, width)
        shot(page, f"{width}-1-sessions")

        page.goto("/#/inbox")
        approval = page.locator("article.card").filter(has_text="Approve refund charge?")
        expect(approval.locator(".session-line a")).to_have_text(title)
        expect(approval.locator(".session-line .meta")).to_have_text("gateway.demo:agent · API")
        expect(approval.locator(".meta", has_text="asked by").first).to_contain_text("asked by local")
        question = page.locator("article.card").filter(has_text="Which plan?")
        expect(question.locator(".session-line a")).to_have_text("upgrade my plan")
        expect(question.locator(".session-line .meta")).to_have_text("gateway.demo:agent · API")
        expect(question.get_by_role("button", name="Enterprise", exact=True)).to_be_visible()
        expect(question.get_by_text("$9 a month, one seat")).to_be_visible()
        fits(page, width)
        shot(page, f"{width}-2-inbox")

        approval.get_by_role("link", name=title, exact=True).click()
        expect(page).to_have_url(f"{embedded}/#/sessions/{refund}")
        expect(page.locator(".session-head h2")).to_have_text(title)
        expect(page.locator(".session-head .meta")).to_contain_text("gateway.demo:agent · API · ")
        card = page.locator("article.card").last
        expect(card.get_by_role("button", name="Approve")).to_be_visible()
        expect(card.get_by_role("button", name="Deny")).to_be_visible()
        expect(page.locator(".history")).to_contain_text("Run 1 paused for input")
        expect(page.locator(".session-head .live")).to_have_text("live")
        fits(page, width)
        box = card.get_by_role("button", name="Deny").bounding_box()
        assert box is not None and box["x"] + box["width"] <= width, box
        shot(page, f"{width}-3-session-waiting")


def test_the_inbox_badge_follows_the_event_stream(page: Any, embedded: str, shot: Shot) -> None:
    """The badge never reads the inbox page: a request opened or answered anywhere shows at once."""
    page.route("**/api/requests*", lambda route: route.abort())  # (the console polled it every 3 s)
    page.goto("/")
    before = len(pending(embedded))
    badge = page.locator("#inbox-count")
    expect(badge).to_have_text(str(before)) if before else expect(badge).to_be_hidden()
    session = start(embedded, "refund $7 on ch_1003")
    expect(badge).to_have_text(str(before + 1))
    row = page.locator("ul.sessions > li").filter(has_text="refund $7 on ch_1003")
    expect(row).to_contain_text("1 open request")  # the list follows too
    shot(page, "1-opened")
    [request] = [r for r in parked(embedded, before + 1) if r["sessionId"] == session]
    started = time.monotonic()
    answered = requests.patch(f"{embedded}/api/requests/{request['requestId']}", json={"optionId": "approve"},
                              timeout=10)
    assert answered.status_code == 200
    expect(badge).to_have_text(str(before)) if before else expect(badge).to_be_hidden()
    assert time.monotonic() - started < 2.5, "not from the stream: a poll every 3 s"
    expect(row).not_to_contain_text("open request")
    shot(page, "2-answered-elsewhere")


def test_a_question_with_more_than_five_options_offers_a_menu(keyed_page: Any, shot: Shot) -> None:
    page = keyed_page
    paste_key(page, KEYS["alice"])
    islands = ["Fiji", "Samoa", "Tonga", "Nauru", "Palau", "Tuvalu"]
    card = start_session(page, script([("pick", {"options": islands})], final="picked"))
    choose = card.get_by_label("Choose")
    expect(choose).to_be_visible()
    expect(card.locator("button.choice")).to_have_count(0)
    expect(card.get_by_role("textbox")).to_have_count(0)  # this question takes one of its options only
    choose.select_option("Tuvalu")
    shot(page, "1-menu")
    card.get_by_role("button", name="Send").click()
    expect(card.locator(".outcome")).to_have_text("answered by alice: Tuvalu")
    expect(page.locator(".message.assistant").last).to_contain_text('"picked": "Tuvalu"')
    shot(page, "2-answered")
