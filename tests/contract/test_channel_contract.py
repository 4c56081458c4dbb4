"""The same scenarios against every channel (DESIGN.md section 7), each through its own driver."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from tests.contract import api_driver, github_driver, slack_driver, twilio_driver
from tests.contract.driver import Driver
from tests.support.agent import read_ledger, script

QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})
REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})

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


def test_an_approval_shows_exactly_one_approve_and_one_cancel_choice(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    labels = [c.lower() for c in shown.choices]
    assert sum("approve" in c for c in labels) == 1
    assert sum(("cancel" in c) or ("deny" in c) for c in labels) == 1
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
    driver.press(sid, first["requestId"], "cancel", "alice")
    assert [r["charge_id"] for r in refunds()] == ["ch_2"]


def test_cancel_never_runs_it(driver: Driver) -> None:
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "cancel", "alice")
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
    sid = driver.open(script([REFUND]), "alice")
    [shown] = driver.shown(sid)
    driver.press(sid, shown.request_id, "approve", "bob")
    assert any("only alice may answer" in m for m in driver.told(sid, "bob"))
    [still] = driver.shown(sid)
    assert still.open
    assert refunds() == []
