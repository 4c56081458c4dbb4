"""Reminders in Slack, end to end: three real `hitl worker` processes on PostgreSQL + Redis, each sweeping every
second, post each reminder once, in the card's thread, mentioning the person it waits for."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.slack import render
from engine.channels.contract import Reminder
from engine.protocol import TIMEOUT_PRINCIPAL
from tests.conftest import more_workers
from tests.slack.test_render import request
from tests.slack.workspace import USERS, WORKER, Workspace
from tests.support.agent import read_ledger, script, wait_for


def test_each_reminder_is_posted_once_in_the_thread_by_three_workers(slack_on_postgres: Workspace,
                                                                    request: pytest.FixtureRequest,
                                                                    tmp_path: Path) -> None:
    slack = slack_on_postgres
    with more_workers(request.config.stash[WORKER][0], 2, tmp_path):
        mention = slack.mention("alice", script([("nudged_refund", {"amount": 5})], final="refunded"))
        [card] = slack.cards(mention)

        def posted() -> list[str]:
            return [m.now["text"] for m in slack.thread(mention) if "Reminder" in m.now["text"]]

        wait_for(lambda: len(posted()) == 2, timeout=15, what="two reminders")
        time.sleep(2.5)  # (a third would be due by now)
        assert posted() == [f"<@{USERS['alice']}> Reminder: \"Approve nudged refund?\" still waits for an answer "
                            "(above)."] * 2
        assert all(m.thread_ts == mention["ts"] for m in slack.thread(mention))

        slack.ok(slack.click("alice", card, "Approve"))
        assert [e["responder"] for e in read_ledger()] == [f"slack:T0TEST:{USERS['alice']}"]


def test_a_reminder_mentions_the_requester_and_the_escalations_slack_approvers() -> None:
    sent = render.reminder(request(), Reminder(1, 2, ("slack:T0TEST:UBOSS", "twilio:+15550002222")))
    assert sent == {"text": "<@UALICE> <@UBOSS> Reminder: \"Approve refund?\" still waits for an answer (above)."}
    assert render.reminder(request(requestedBy=None), Reminder(1, 2))["text"].startswith("Reminder:")  # no mention


def test_the_card_says_when_it_escalated_that_it_is_approved_on_timeout_and_then_by_whom() -> None:
    at = datetime(2026, 1, 1, 9, 30, tzinfo=UTC)
    notes = render.notes(request(expiresAt=at, onTimeout="approve", escalatedAt=at))
    assert notes[1].endswith("|2026-01-01T09:30:00+00:00> (then approved automatically)")
    assert notes[2] == "Escalated <!date^1767259800^{date_short_pretty} at {time}|2026-01-01T09:30:00+00:00>"
    timed_out = request(status="resolved", outcome="approved", responder=TIMEOUT_PRINCIPAL.wire())
    assert render.outcome_line(timed_out) == "Approved on timeout"
