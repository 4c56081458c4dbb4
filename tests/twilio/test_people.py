"""One person across channels, end to end through the webhooks: alice starts a turn in Slack, its approval is
texted to her phone too, and she approves it by SMS once her number is linked to her Slack user (the default
response policy: the requester, any principal of the requester's person). Slack's card and her SMS name her.
It runs on SQLite with in-process jobs, and on PostgreSQL with a real `hitl worker` that has Slack and Twilio
against their fakes and never sweeps during the test: the test sweeps itself, its runtime's clock moved past the
escalation."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from engine.channels.delivery import place_title
from engine.jobs.recovery import sweep
from engine.store.queries import title_of
from tests.gateway.test_places import slack_and_sms
from tests.slack.workspace import USERS
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import TEAM
from tests.twilio.support import ALICE

PROMPT = "Approve texted refund?\namount=40\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_alice_starts_in_slack_and_approves_from_her_linked_number(request: pytest.FixtureRequest, tmp_path: Path,
                                                                  kind: str) -> None:
    with slack_and_sms(request, kind, tmp_path, swept=False) as (slack, sms):
        stack = slack.stack
        message = script([("texted_refund", {"amount": 40})], final="refunded")
        started = slack.mention("alice", message)
        [card] = slack.cards(started)
        now = stack.rt.clock()
        stack.rt.clock = lambda: now + timedelta(seconds=2)
        assert sweep(stack.rt).escalated == 1
        stack.wait_idle()
        about = place_title(title_of(message))  # her phone names the session it comes from
        assert sms.inbox(ALICE) == [PROMPT.replace("refund?", f"refund? ({about})", 1)]

        sms.text(ALICE, "1")  # her number is nobody's yet: not the Slack user who asked
        assert read_ledger() == []
        [refused] = [e["data"] for e in stack.events(slack.session_of(started)) if e["type"] == "approval.candidate"
                     and e["data"]["outcome"] == "rejected"]
        assert refused["responder"]["principalId"] == f"twilio:{ALICE}" and stack.pending(slack.session_of(started))

        linked = stack.client("bob:operator").post("/api/people", json={
            "name": "alice", "displayName": "Alice Ng", "principals": [f"slack:{TEAM}:{USERS['alice']}",
                                                                       f"twilio:{ALICE}"]})
        assert linked.status_code == 201, linked.get_data(as_text=True)
        sms.text(ALICE, "1")

        [ran] = read_ledger()
        assert (ran["tool"], ran["requester"], ran["responder"]) == (
            "texted_refund", f"slack:{TEAM}:{USERS['alice']}", f"twilio:{ALICE}")
        told = sms.inbox(ALICE)[-1]  # (a confirmation's prompt is cut to 60 characters)
        assert told.startswith("Approve texted refund? (") and told.endswith(" Approved by Alice Ng via SMS.")
        settled = card.versions[-1]
        assert "Approved by Alice Ng via SMS" in settled["text"]
        [resolved] = [e["data"] for e in stack.events(slack.session_of(started)) if e["type"] == "input.resolved"]
        assert resolved["resolutions"][0]["responder"]["attributes"]["personName"] == "Alice Ng"  # the audit too
