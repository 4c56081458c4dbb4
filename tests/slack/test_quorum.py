"""Approvals that take several people of a Slack user group, end to end through a real `hitl worker` on
PostgreSQL + Redis: the card counts the approvals, and a user group Slack cannot give refuses (fail closed)."""

from __future__ import annotations

from typing import Any

from tests.slack.workspace import USERS, Workspace
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import TEAM, Message


def context_lines(card: Message) -> list[str]:
    return [e["text"] for b in card.now["blocks"] if b["type"] == "context" for e in b["elements"]]


def buttons(card: Message) -> list[str]:
    return [e["text"]["text"] for b in card.now["blocks"] if b["type"] == "actions" for e in b["elements"]]


def ran(tool: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool]


def test_two_of_a_slack_user_group_of_three_approve_one_of_them_twice(slack_on_postgres: Workspace) -> None:
    slack = slack_on_postgres
    slack.fake.usergroups["S0RELEASE"] = [USERS["alice"], USERS["bob"], USERS["carol"]]
    mention = slack.mention("alice", script([("slack_release", {"version": "3.1"})], final="released"))
    [card] = slack.cards(mention)

    slack.ok(slack.click("alice", card, "Approve"))
    assert "1 of 2 approvals: alice" in context_lines(card)
    assert buttons(card) == ["Approve", "Deny"]
    slack.ok(slack.click("alice", card, "Approve"))
    assert "1 of 2 approvals: alice" in context_lines(card)
    assert ran("slack_release") == []

    slack.ok(slack.click("bob", card, "Approve"))

    assert [(e["version"], e["responder"]) for e in ran("slack_release")] == [("3.1", f"slack:{TEAM}:{USERS['bob']}")]
    assert buttons(card) == []
    assert f"Approved by <@{USERS['alice']}>, <@{USERS['bob']}>" in card.now["text"]
    assert slack.thread(mention)[-1].now["text"].startswith("released")
    assert len(slack.fake.called("usergroups.users.list")) == 1  # kept: three clicks asked Slack once


def test_a_user_group_slack_cannot_give_refuses_and_the_person_is_told(slack_on_postgres: Workspace) -> None:
    slack = slack_on_postgres
    mention = slack.mention("alice", script([("unknown_group_release", {"version": "3.2"})]))
    [card] = slack.cards(mention)

    slack.ok(slack.click("alice", card, "Approve"))

    assert ran("unknown_group_release") == []
    assert buttons(card) == ["Approve", "Deny"]
    [told] = slack.fake.ephemerals
    assert told.user == USERS["alice"]
    assert "the members of slack-usergroup:S0GONE could not be looked up" in told.text
    assert "no_such_subteam" in told.text
    [request] = slack.stack.pending(slack.session_of(mention))
    assert request["status"] == "pending"
