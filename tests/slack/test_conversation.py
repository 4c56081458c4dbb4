"""Conversations in Slack: a mention starts a turn, its requests become cards, people answer from Slack."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.slack.workspace import USERS, Workspace, fixture, workspace
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import Message

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})


def refunds() -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def controls(card: Message, version: int = -1) -> list[str]:
    """The labels of the card's buttons and menu options, as the person sees them."""
    labels: list[str] = []
    for block in card.versions[version]["blocks"]:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            labels.extend(o["text"]["text"] for o in element.get("options", []))
            if element["type"] == "button":
                labels.append(element["text"]["text"])
    return labels


def texts(card: Message) -> str:
    blocks = card.now["blocks"]
    return " ".join(b["text"]["text"] for b in blocks if b["type"] == "section" and "text" in b)


def test_a_mention_starts_a_turn_and_its_approval_is_a_card_in_the_thread(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND]))
    [card] = slack.cards(mention)
    assert card.thread_ts == mention["ts"]
    assert controls(card) == ["Approve", "Deny"]
    assert "Approve refund?" in card.now["text"]
    fields = next(b["fields"] for b in card.now["blocks"] if "fields" in b)
    assert [f["text"] for f in fields] == ["*charge_id*\nch_1", "*amount*\n5"]
    assert "step 1" in [m.now["text"] for m in slack.thread(mention)]


def test_the_requester_approves_then_the_tool_runs_once_and_the_card_names_them(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND], final="refunded"))
    [card] = slack.cards(mention)
    slack.ok(slack.click("alice", card, "Approve"))
    slack.ok(slack.click("alice", card, "Approve", version=0))  # a double click, before the update arrived
    assert len(refunds()) == 1 and refunds()[0]["responder"] == f"slack:T0TEST:{USERS['alice']}"
    assert controls(card) == []
    assert f"Approved by <@{USERS['alice']}>" in texts(card)
    assert slack.thread(mention)[-1].now["text"].startswith("refunded")


def test_deny_never_runs_the_tool_and_says_who_denied(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("alice", card, "Deny"))
    assert refunds() == []
    assert f"Denied by <@{USERS['alice']}>" in texts(card)


def test_a_card_posted_while_the_refusal_read_cancel_still_denies(slack: Workspace) -> None:
    """Cards already in Slack keep their old button: it carries the option's number, so it still denies."""
    mention = slack.mention("alice", script([REFUND]))
    [card] = slack.cards(mention)
    click = slack.click_payload("alice", card, "Deny")
    posted_before = json.loads(json.dumps(click).replace("Deny", "Cancel"))  # as that release drew it
    assert "Deny" not in json.dumps(posted_before)
    slack.ok(slack.send_interaction(posted_before))
    assert refunds() == []
    assert f"Denied by <@{USERS['alice']}>" in texts(card)


def test_another_user_is_refused_in_an_ephemeral_and_the_request_stays_open(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("bob", card, "Approve"))
    [told] = slack.fake.ephemerals
    assert (told.user, told.channel, told.thread_ts) == (USERS["bob"], card.channel, mention["ts"])
    assert f"only <@{USERS['alice']}> may answer this request" in told.text
    assert controls(card) == ["Approve", "Deny"] and len(card.versions) == 1
    assert refunds() == []


def test_an_answer_the_response_policy_cannot_judge_is_told_so_and_the_request_stays_open(slack: Workspace) -> None:
    mention = slack.mention("alice", script([("audited_refund", {"amount": 5})]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("alice", card, "Approve"))
    [told] = slack.fake.ephemerals  # not left wondering: the policy failed, and she may try again
    assert told.user == USERS["alice"] and "the response policy failed: ConnectionError" in told.text
    assert controls(card) == ["Approve", "Deny"] and len(card.versions) == 1
    assert read_ledger() == []


def test_sibling_cards_keep_their_controls_when_one_is_answered(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND, ("refund", {"charge_id": "ch_2", "amount": 6})]))
    first, second = slack.cards(mention)
    slack.ok(slack.click("alice", second, "Approve"))
    assert controls(first) == ["Approve", "Deny"]
    assert controls(second) == []


def test_a_question_is_answered_from_its_menu(slack: Workspace) -> None:
    mention = slack.mention("alice", script([QUESTION]))
    [card] = slack.cards(mention)
    assert controls(card) == ["Red", "Blue", "Type an answer"]
    slack.ok(slack.click("alice", card, "Blue"))
    assert f"Answered: Blue (by <@{USERS['alice']}>)" in texts(card)
    assert '"answer": "Blue"' in slack.thread(mention)[-1].now["text"]


def test_a_typed_answer_from_the_modal(slack: Workspace) -> None:
    mention = slack.mention("alice", script([QUESTION]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("alice", card, "Type an answer"))
    [opened] = slack.fake.called("views.open")
    slack.ok(slack.submit_answer("alice", opened.params["view"], "teal, please"))
    assert "Answered: teal, please" in texts(card)


def test_a_thread_reply_answers_the_first_open_request(slack: Workspace) -> None:
    second = ("ask_question", {"question": "Which size?", "options": [{"label": "S"}, {"label": "L"}]})
    mention = slack.mention("alice", script([QUESTION, second]))
    colors, sizes = slack.cards(mention)
    slack.reply("alice", "2", mention["ts"])
    assert "Answered: Blue" in texts(colors)
    assert controls(sizes) == ["S", "L", "Type an answer"]


def test_a_thread_reply_in_a_group_dm_answers_too(slack: Workspace) -> None:
    """A mention in a group DM (an `mpim`) starts a session in its thread; Slack sends the thread's replies as
    `message.mpim` events (the manifest subscribes to them), which answer like any thread reply."""
    mention = slack.event("app_mention", "alice", f"<@UBOT> {script([QUESTION])}", channel="G0GROUP")
    slack.ok(slack.send_event(mention))
    [card] = slack.cards(mention["event"])
    reply = slack.event("message", "alice", "Blue", thread_ts=mention["event"]["ts"], channel="G0GROUP",
                        channel_type="mpim")
    slack.ok(slack.send_event(reply))
    assert f"Answered: Blue (by <@{USERS['alice']}>)" in texts(card)


def test_a_reply_with_a_file_attached_answers_too(slack: Workspace) -> None:
    """Slack sends a message with a file as the `file_share` subtype: it is still the person writing."""
    mention = slack.mention("alice", script([QUESTION]))
    [card] = slack.cards(mention)
    slack.ok(slack.send_event(slack.event("message_file_share", "alice", "Blue", thread_ts=mention["ts"])))
    assert f"Answered: Blue (by <@{USERS['alice']}>)" in texts(card)


def test_a_reply_mentioning_the_bot_counts_once(slack: Workspace) -> None:
    """Slack sends such a reply twice (app_mention and message): only the app_mention is taken."""
    mention = slack.mention("alice", script([QUESTION]))
    [card] = slack.cards(mention)
    reply = slack.event("app_mention", "alice", "<@UBOT> Red", thread_ts=mention["ts"])
    copy = slack.event("message", "alice", "<@UBOT> Red", thread_ts=mention["ts"])
    slack.ok(slack.send_event(reply))
    slack.ok(slack.send_event(copy))
    sid = slack.session_of(mention)
    assert "Answered: Red" in texts(card)
    said = [e["data"]["text"] for e in slack.stack.events(sid) if e["type"] == "message.received"]
    assert said[1:] == ["Red"]
    assert len(slack.stack.history(sid)["turns"]) == 1


def test_an_org_wide_install_click_names_the_users_own_team(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """`team` is null in payloads of an org-wide install: the principal's team is `user.team_id` (the click's
    organization is allowed, so the click counts)."""
    with workspace(request, "sqlite", tmp_path, slack_allowed_teams=["T0TEST", "E0GRID"]) as slack:
        mention = slack.mention("alice", script([REFUND]))
        [card] = slack.cards(mention)
        payload = fixture("block_actions_org_wide")
        payload["actions"] = slack.click_payload("alice", card, "Approve")["actions"]
        payload["container"].update(channel_id=card.channel, message_ts=card.ts)
        slack.ok(slack.send_interaction(payload))
        [candidate] = slack.stack.turn(slack.session_of(mention))["requests"][0]["candidates"]
        assert candidate["responder"]["principalId"] == "slack:T0GRID:WALICE"
        assert candidate["responder"]["attributes"]["enterpriseId"] == "E0GRID"
        assert candidate["outcome"] == "rejected"  # not alice of T0TEST, who asked


def test_a_session_started_by_the_api_asks_in_the_given_slack_thread(slack: Workspace) -> None:
    created = slack.stack.client("alice").post("/api/sessions", json={
        "message": script([REFUND]), "channel": "slack",
        "address": {"channel": "C0TEST", "threadTs": "1700000000.000100"}})
    assert created.status_code == 201
    slack.wait_idle()
    [card] = [m for m in slack.fake.thread("C0TEST", "1700000000.000100") if m.versions[0]["blocks"]]
    assert controls(card) == ["Approve", "Deny"]
    slack.ok(slack.click("alice", card, "Approve"))  # Slack's alice is not the API caller who asked
    assert "only alice may answer this request" in slack.fake.ephemerals[0].text
