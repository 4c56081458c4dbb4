"""End to end through a real `hitl worker` on PostgreSQL + Redis: Slack in, Slack out, nothing in between
but the gateway's own jobs."""

from __future__ import annotations

from tests.slack.workspace import USERS, Workspace
from tests.support.agent import read_ledger, script


def test_a_mention_is_approved_in_slack_and_answered_in_its_thread(slack_on_postgres: Workspace) -> None:
    slack = slack_on_postgres
    mention = slack.mention("alice", script([("refund", {"charge_id": "ch_9", "amount": 12})], final="all done"))
    [card] = slack.cards(mention)
    assert [e["text"]["text"] for b in card.now["blocks"] if b["type"] == "actions" for e in b["elements"]] == \
        ["Approve", "Deny"]

    slack.ok(slack.click("alice", card, "Approve"))

    assert [(e["charge_id"], e["responder"]) for e in read_ledger() if e["tool"] == "refund"] == \
        [("ch_9", f"slack:T0TEST:{USERS['alice']}")]
    assert len(card.versions) == 2
    assert not [b for b in card.now["blocks"] if b["type"] == "actions"]
    assert f"Approved by <@{USERS['alice']}>" in card.now["text"]
    final = slack.thread(mention)[-1]
    assert final.now["text"].startswith("all done") and final.thread_ts == mention["ts"]
    assert [c.token for c in slack.fake.called("chat.postMessage")] == ["xoxb-test-token"] * 3  # step 1, card, answer
