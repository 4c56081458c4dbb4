"""The same scenarios against every channel (DESIGN.md section 7), each through its own driver; those about the
queue of prompts (the next is posted when the shown one closes) against the text channels, which have one."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import cast

import pytest

from engine.answers.conversation import cancel_turn
from engine.jobs.recovery import sweep
from engine.protocol import operator_principal
from tests.contract import api_driver, github_driver, slack_driver, twilio_driver
from tests.contract.driver import Driver, Shown, TextDriver
from tests.support.agent import read_ledger, script

QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})
REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
REFUND_AND_DEPLOY = script([REFUND, ("deploy", {"env": "prod"})])
"""Two approvals of one step, shown in this order: the refund's expires after 10 minutes, the deploy's never."""

DriverFactory = Callable[[pytest.FixtureRequest, str, Path], AbstractContextManager[Driver]]
DRIVERS: dict[str, DriverFactory] = {"console": api_driver.driver, "slack": slack_driver.driver,
                                     "twilio": twilio_driver.driver, "github": github_driver.driver}
"""Each channel's driver factory: (request, stack kind, tmp_path) -> a context manager yielding the driver."""


@pytest.fixture(params=[(name, kind) for name in sorted(DRIVERS) for kind in ("sqlite", "postgres")],
                ids=lambda p: "-".join(p))
def driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Driver]:
    name, kind = request.param
    with DRIVERS[name](request, kind, tmp_path) as built:
        yield built


ONE_AT_A_TIME = ("github", "twilio")
"""The text channels: they show one request at a time, in order, and the next when the shown one closes."""


@pytest.fixture(params=[(name, kind) for name in ONE_AT_A_TIME for kind in ("sqlite", "postgres")],
                ids=lambda p: "-".join(p))
def text_driver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[TextDriver]:
    """The scenarios about the queue of prompts, run against the channels that have one."""
    name, kind = request.param
    with DRIVERS[name](request, kind, tmp_path) as built:
        assert built.stack.rt.channels[name].one_at_a_time
        yield cast(TextDriver, built)


def refunds() -> list[dict]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def answer_of(driver: Driver, sid: str) -> str:
    return str(driver.stack.turn(sid)["result"])


def test_every_option_of_a_question_is_shown(driver: Driver) -> None:
    sid = driver.open(script([QUESTION]), "alice")
    [shown] = driver.shown(sid)
    assert "Which color?" in shown.text
    assert [c.split(" - ")[0] for c in shown.choices][:2] == ["Red", "Blue"]
    assert shown.open


def test_pressing_an_option_answers_with_it(driver: Driver) -> None:
    sid = driver.open(script([QUESTION]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "Blue", "alice")
    assert '"answer": "Blue"' in answer_of(driver, sid)


def test_a_typed_reply_answers_the_first_open_request(driver: Driver) -> None:
    second = ("ask_question", {"question": "Which size?", "options": [{"label": "S"}, {"label": "L"}]})
    sid = driver.open(script([QUESTION, second]), "alice")
    driver.type(sid, "2", "alice")
    requests = driver.stack.turn(sid)["requests"]
    assert [(r["status"], r["outcome"]) for r in requests] == [("resolved", "answered"), ("pending", None)]
    assert requests[0]["response"]["optionId"] == "Blue"


def test_unmatched_text_is_a_free_text_answer_where_allowed(driver: Driver) -> None:
    sid = driver.open(script([QUESTION]), "alice")
    driver.type(sid, "something teal", "alice")
    assert '"answer": "something teal"' in answer_of(driver, sid)


def test_an_approval_shows_exactly_one_approve_and_one_deny_choice(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    labels = [c.lower() for c in shown.choices]
    assert sum("approve" in c for c in labels) == 1
    assert sum("deny" in c for c in labels) == 1
    assert not [c for c in labels if "cancel" in c]
    assert len(labels) == 2


def test_approve_runs_the_tool_and_approving_twice_runs_it_once(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "approve", "alice")
    driver.press(sid, shown.request_id, "approve", "alice")
    assert len(refunds()) == 1
    assert driver.stack.turn(sid)["status"] == "completed"


def test_approving_one_of_two_runs_only_that_one(driver: Driver) -> None:
    sid = driver.open(script([REFUND, ("refund", {"charge_id": "ch_2", "amount": 6})]), "alice")
    first, second = driver.stack.pending(sid)
    driver.press(sid, second["requestId"], "approve", "alice")
    driver.press(sid, first["requestId"], "deny", "alice")
    assert [r["charge_id"] for r in refunds()] == ["ch_2"]


def test_deny_never_runs_it(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "deny", "alice")
    assert refunds() == []
    assert driver.stack.turn(sid)["requests"][0]["outcome"] == "denied"


def test_a_settled_prompt_loses_its_controls_and_names_who_answered(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "approve", "alice")
    [settled] = driver.shown(sid)
    assert not settled.open
    assert "alice" in settled.text.lower()


def test_a_refused_responder_is_told_why_and_the_request_stays_open(driver: Driver) -> None:
    """In a chat bob sees alice's prompt and the response policy refuses him; in the console (where he answers
    an SMS thread that is not his) his key (a user's) does not see her request at all, and is told it finds none
    (docs/access.md)."""
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "approve", "bob")
    in_console = driver.name in ("console", "twilio")
    why = f"no input request {shown.request_id!r}" if in_console else "only alice may answer"
    assert any(why in m for m in driver.told(sid, "bob"))
    [still] = driver.shown(sid)
    assert still.open
    assert refunds() == []


# -- a prompt closed by something other than an answer ------------------------------------------------------


def deploys() -> list[dict]:
    return [e for e in read_ledger() if e["tool"] == "deploy"]


def expire_the_refund(driver: Driver) -> None:
    """Eleven minutes on, a sweep: the refund's approval expires, the deploy's stays open."""
    now = driver.stack.rt.clock()
    driver.stack.rt.clock = lambda: now + timedelta(minutes=11)
    assert sweep(driver.stack.rt).expired == 1
    driver.stack.wait_idle()


def test_an_expired_prompt_closes_and_the_next_request_is_shown(driver: Driver) -> None:
    sid = driver.open(REFUND_AND_DEPLOY, "alice")
    expire_the_refund(driver)
    refund, deploy = driver.shown(sid)
    assert not refund.open and deploy.open
    driver.press(sid, deploy.request_id, "approve", "alice")
    assert [e["env"] for e in deploys()] == ["prod"] and refunds() == []
    assert driver.stack.turn(sid)["status"] == "completed"


def test_a_steer_closes_every_open_prompt(driver: Driver) -> None:
    sid = driver.open(REFUND_AND_DEPLOY, "alice")
    driver.type(sid, "hello there", "alice")
    assert [s.open for s in driver.shown(sid)] in ([False], [False, False])  # a text channel showed one
    assert [r["outcome"] for r in driver.stack.turn(sid)["requests"]] == ["ignored", "ignored"]
    assert answer_of(driver, sid) == "noted: hello there" and refunds() == deploys() == []


def test_a_cancelled_turn_closes_every_open_prompt(driver: Driver) -> None:
    sid = driver.open(REFUND_AND_DEPLOY, "alice")
    cancel_turn(driver.stack.rt, sid, operator_principal("ops"))
    driver.stack.wait_idle()
    assert [s.open for s in driver.shown(sid)] in ([False], [False, False])
    assert driver.stack.turn(sid)["status"] == "cancelled" and refunds() == deploys() == []


# -- the text channels' queue: the next prompt is posted when the shown one closes, once, in order --------------


def prompts_of(said: list[str], text: str) -> list[int]:
    """Where in what was said a prompt showing `text` (a call's input) is."""
    return [i for i, m in enumerate(said) if text in m]


def outcome_line(shown: Shown) -> str:
    return shown.text.splitlines()[-1]


def test_when_the_shown_prompt_expires_the_next_is_posted_once(text_driver: TextDriver) -> None:
    sid = text_driver.open(REFUND_AND_DEPLOY, "alice")
    [refund] = text_driver.shown(sid)
    assert refund.open and prompts_of(text_driver.said(sid), "env=prod") == []
    expire_the_refund(text_driver)
    refund, deploy = text_driver.shown(sid)
    assert not refund.open and "Expired: nobody answered in time." in outcome_line(refund)
    assert deploy.open
    said = text_driver.said(sid)
    [at] = prompts_of(said, "env=prod")
    assert prompts_of(said, "charge_id=ch_1")[0] < at == len(said) - 1  # after the refund's, and last
    sweep(text_driver.stack.rt)
    text_driver.stack.wait_idle()
    assert text_driver.said(sid) == said  # nothing posted twice
    text_driver.press(sid, deploy.request_id, "approve", "alice")
    after = text_driver.said(sid)[len(said):]
    assert after[-1].startswith("done") and prompts_of(after, "env=prod") == prompts_of(after, "charge_id") == []


def test_when_the_turns_person_cancels_it_the_shown_prompt_closes_and_nothing_more_is_posted(
        text_driver: TextDriver) -> None:
    sid = text_driver.ask(REFUND_AND_DEPLOY, "alice")  # alice's app asks on her phone, or on an issue
    [refund] = text_driver.shown(sid)
    assert refund.open
    response = text_driver.stack.client("alice").post(f"/api/sessions/{sid}/cancel")
    assert response.status_code == 202, response.get_json()
    text_driver.stack.wait_idle()
    [refund] = text_driver.shown(sid)
    assert not refund.open and "No longer needed." in outcome_line(refund)
    said = text_driver.said(sid)
    assert prompts_of(said, "env=prod") == [] and len(prompts_of(said, "charge_id=ch_1")) == 1
    sweep(text_driver.stack.rt)
    text_driver.stack.wait_idle()
    assert text_driver.said(sid) == said


def test_when_a_steer_closes_the_shown_prompt_nothing_more_is_posted(text_driver: TextDriver) -> None:
    sid = text_driver.open(REFUND_AND_DEPLOY, "alice")
    text_driver.type(sid, "hello there", "alice")
    [refund] = text_driver.shown(sid)
    assert not refund.open and "No longer needed." in outcome_line(refund)
    said = text_driver.said(sid)
    assert prompts_of(said, "env=prod") == [] and said[-1] == "noted: hello there"
