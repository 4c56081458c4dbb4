"""How a request reaches a person (issue 28): a Slack DM is opened after the transaction that opened the request
committed, and opened again by the sweep while Slack fails; a question asked with `ctx.ask` is shown to a person like
an approval; a person GitHub alone knows cannot be written to, which the API refuses and an agent's request notes."""

from __future__ import annotations

import logging
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from engine import ToolContext, ask_question, defaults
from engine.jobs.recovery import sweep
from engine.store.tables import Outbox
from engine.turns.transitions import lock_session, lock_turn
from tests.gateway.test_places import (
    BOBS_PHONE,
    add_group,
    add_person,
    card_in,
    slack_and_sms,
    title,
)
from tests.slack.workspace import USERS, Workspace
from tests.support.agent import SUPPORT_CHANNEL, read_ledger, script, wait_for
from tests.support.fake_slack import TEAM
from tests.twilio.support import BOB

SLACK_BOB = f"slack:{TEAM}:{USERS['bob']}"
BOBS_DM = f"D{USERS['bob']}"


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_persons_slack_dm_is_opened_once_the_request_committed_and_nothing_is_locked_meanwhile(
        request: pytest.FixtureRequest, tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    with slack_and_sms(request, kind, tmp_path) as (slack, _):
        add_person(slack.stack, "manager", [SLACK_BOB, BOBS_PHONE], display="Maria Manager")
        mention = slack.mention("alice", "Refund order 1234")
        session_id = slack.session_of(mention)
        seen: list[str] = []
        answer = slack.fake.ok

        def opening(method: str, params: dict[str, Any]) -> dict[str, Any]:
            if method == "conversations.open":  # what another connection finds while Slack is asked
                seen.append(while_asked(slack, session_id, kind))
            return answer(method, params)

        monkeypatch.setattr(slack.fake, "ok", opening)
        slack.reply("alice", script([("managed_refund", {"amount": 120})], final="refunded"), thread_ts=mention["ts"])

        dm = card_in(slack, BOBS_DM)
        assert seen == ["the request is committed, and its session and turn can be locked at once"]
        assert f"Approve managed refund? ({title(slack.stack, session_id)})" in dm.now["text"]
        assert card_in(slack, SUPPORT_CHANNEL) is not None


def while_asked(slack: Workspace, session_id: str, kind: str) -> str:
    """Whether the request of the session is committed (another connection sees it) and its session and turn rows
    can be locked by another transaction at once."""
    pending = slack.stack.pending(session_id)
    if not pending:
        return "the request is not committed"
    try:
        with slack.stack.rt.transaction() as db:
            if kind == "postgres":
                db.execute(text("SET LOCAL lock_timeout = '2s'"))
            lock_session(db, session_id)
            lock_turn(db, pending[0]["turnId"])
    except Exception as exc:
        return f"locked: {exc}"
    return "the request is committed, and its session and turn can be locked at once"


def test_a_dm_slack_failed_to_open_is_opened_by_the_sweep_and_shows_the_request_once(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    with slack_and_sms(request, "sqlite", tmp_path) as (slack, _):
        add_person(slack.stack, "manager", [SLACK_BOB, BOBS_PHONE], display="Maria Manager")
        slack.fake.fail("conversations.open", status=503, error="service_unavailable")
        mention = slack.mention("alice", "Refund order 1234")
        slack.reply("alice", script([("managed_refund", {"amount": 120})], final="refunded"), thread_ts=mention["ts"])
        slack.wait_idle()
        card_in(slack, SUPPORT_CHANNEL)  # the other places show it meanwhile
        assert [m for m in slack.fake.messages if m.channel == BOBS_DM] == []
        with slack.stack.rt.db.read() as db:  # what is owed stays in the outbox
            assert db.execute(select(Outbox.job)).scalars().all() == ["show_direct"]

        clock = slack.stack.rt.clock
        later = clock() + timedelta(seconds=defaults.SWEEP_OUTBOX_AFTER_SECONDS + 1)
        slack.stack.rt.clock = lambda: later
        assert sweep(slack.stack.rt).pushed == 1
        slack.wait_idle()
        assert sweep(slack.stack.rt).pushed == 0  # done: nothing left to push

        dm = card_in(slack, BOBS_DM)
        assert len(slack.fake.called("conversations.open")) == 2
        slack.ok(slack.click("bob", dm, "Approve"))  # the manager approves in the DM, a place of the request
        assert len(read_ledger()) == 1
        assert dm.now["text"].startswith(f"Approved by <@{USERS['bob']}>")
        assert [m.ts for m in slack.fake.messages if m.channel == BOBS_DM] == [dm.ts]  # shown there once


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_a_question_shown_to_a_person_is_answered_by_their_sms(
        request: pytest.FixtureRequest, tmp_path: Path, kind: str) -> None:
    with slack_and_sms(request, kind, tmp_path) as (slack, sms):
        add_person(slack.stack, "bob", [BOBS_PHONE], display="Bob Stone")
        mention = slack.mention("alice", "Pay the invoice")
        slack.reply("alice", script([("account_question", {})], final="paid"), thread_ts=mention["ts"])
        session_id = slack.session_of(mention)

        wait_for(lambda: sms.inbox(BOB), timeout=30, what="bob's text")
        assert sms.inbox(BOB) == ["Which account? (Pay the invoice)\n1. Checking\n2. Savings\n"
                                  "Reply with a number or your answer."]
        sms.text(BOB, "2")
        wait_for(lambda: slack.stack.turn(session_id, seq=2)["status"] == "completed", timeout=30,
                 what="the turn to complete")
        slack.wait_idle()
        results = [e["data"] for e in slack.stack.events(session_id) if e["type"] == "action.result"]
        assert results[-1]["output"] == {"account": "Savings"}
        assert slack.cards(mention) == []  # show_in_session=False: not in the thread where it was asked
        assert "Answered: Savings (by Bob Stone via SMS)" in sms.inbox(BOB)[-1]


def test_ctx_ask_and_ask_question_name_a_wrong_show_to() -> None:
    with pytest.raises(ValueError, match="show_in_session=False needs show_to"):  # where the agent is defined
        ask_question(show_in_session=False)

    class Asked(Exception):
        pass

    class Workflow:
        def ask(self, *args: object) -> None:
            raise Asked

        def step(self, *args: object) -> None: ...

    ctx = ToolContext("s", "t", "c", None, None, "k", workflow=Workflow())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="show_in_session=False needs show_to"):
        ctx.ask("Which account?", show_in_session=False)
    with pytest.raises(ValueError, match='a person place is {"person": "<name>"}'):
        ctx.ask("Which account?", show_to={"person": ""})
    with pytest.raises(Asked):
        ctx.ask("Which account?", show_to=[{"group": "finance"}], show_in_session=False)


def test_the_api_refuses_a_person_only_github_knows(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    with slack_and_sms(request, "sqlite", tmp_path) as (slack, _):
        add_person(slack.stack, "gina", ["github:1001"])
        add_person(slack.stack, "bob", [BOBS_PHONE])
        add_group(slack.stack, "release", ["person:bob", "person:gina"])
        agent = slack.stack.client("bot:agent")
        for to, field in (({"person": "gina"}, "to.person"), ([{"person": "bob"}, {"group": "release"}], "to.1.group")):
            refused = agent.post("/api/requests", json={"kind": "question", "prompt": "Ship?", "to": to})
            error = refused.get_json()["error"]
            assert (refused.status_code, error["code"], error["details"]["field"]) == (
                422, "unreachable_person", field)
            assert "'gina'" in error["message"] and "GitHub has no direct messages" in error["message"]
        assert agent.get("/api/requests").get_json()["requests"] == []  # nothing stored


def test_an_agents_request_for_a_person_only_github_knows_opens_and_says_where_it_was_not_shown(
        request: pytest.FixtureRequest, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with slack_and_sms(request, "sqlite", tmp_path) as (slack, _), caplog.at_level(logging.ERROR):
        add_person(slack.stack, "manager", ["github:1002"])
        mention = slack.mention("alice", "Refund order 1234")
        slack.reply("alice", script([("managed_refund", {"amount": 120})], final="refunded"), thread_ts=mention["ts"])
        slack.wait_idle()

        [card] = slack.cards(mention)  # it opens, shown where it was asked and in the support channel
        card_in(slack, SUPPORT_CHANNEL)
        [requested] = [e for e in slack.stack.events(slack.session_of(mention)) if e["type"] == "input.requested"]
        [note] = requested["data"]["notShown"]
        assert (note["requestId"], note["place"]) == (requested["data"]["requests"][0]["requestId"],
                                                      {"person": "manager"})
        assert note["reason"].startswith("no configured channel can write to 'manager' on their own (github:1002); "
                                         "GitHub has no direct messages")
        assert any(note["reason"] in record.getMessage() for record in caplog.records)
