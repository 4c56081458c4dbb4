"""Reminders in Slack, end to end: three real `hitl worker` processes on PostgreSQL + Redis, each sweeping every
second, post each reminder once, in the card's thread, mentioning the person it waits for."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.conftest import more_workers
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
