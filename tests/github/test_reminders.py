"""A reminder on GitHub: a comment that mentions who asked and says how to answer the prompt above, which a reply
after it still answers."""

from __future__ import annotations

from datetime import timedelta

from adapters.github.render import render_reminder_comment
from engine.jobs.recovery import sweep
from engine.protocol import Principal
from tests.github.support import ALICE, BOT, REPO, Github
from tests.github.test_channel import request_with
from tests.support.agent import read_ledger, script

OCTOCAT = Principal(authenticator="github", issuer="github", principal_type="user", principal_id="github:1001",
                    attributes={"login": "octocat"})


def test_a_reminder_mentions_the_requester_and_nobody_the_prompt_names() -> None:
    asked = request_with("Ping @hubot about it?", {"team": "x"}).model_copy(update={"requested_by": OCTOCAT})
    assert render_reminder_comment(asked) == \
        "@octocat Reminder: Ping @\u200bhubot about it? Reply `/approve` or `/deny <note>`."
    anonymous = request_with("Deploy?", {})
    assert render_reminder_comment(anonymous) == "Reminder: Deploy? Reply `/approve` or `/deny <note>`."


def test_a_reminder_comment_mentions_alice_and_her_reply_after_it_answers_the_prompt(github: Github) -> None:
    github.comment(ALICE, f"@{BOT} {script([('nudged_refund', {'amount': 5})], final='refunded')}", issue=3)
    now = github.stack.rt.clock()
    github.stack.rt.clock = lambda: now + timedelta(seconds=1.5)
    assert sweep(github.stack.rt).reminded == 1
    github.wait_idle()
    assert github.said(issue=3)[-1] == \
        "@alice Reminder: Approve nudged refund? Reply `/approve` or `/deny <note>`."

    github.comment(ALICE, "/approve", issue=3)
    assert [(e["tool"], e["responder"]) for e in read_ledger()] == [("nudged_refund", "github:1001")]


def test_a_reminder_mentions_escalation_approvers_given_by_account_id_by_their_login(github: Github) -> None:
    github.fake.users[4242] = "octo-boss"  # 999 is no account GitHub tells about
    created = github.stack.client("bot:agent").post("/api/requests", json={
        "kind": "tool-approval", "action": {"toolName": "refund_charge", "input": {"amount": 20}},
        "to": {"channel": "github", "address": {"repo": REPO, "issue": 5}}, "remind": {"every": 60, "max": 2},
        "escalate": {"after": 30, "approvers": ["github:4242", "github:999", "alice"]}})
    assert created.status_code == 201, created.get_json()
    github.wait_idle()
    start = github.stack.rt.clock()
    for seconds in (31, 61, 121):
        github.stack.rt.clock = lambda seconds=seconds: start + timedelta(seconds=seconds)  # type: ignore[misc]
        sweep(github.stack.rt)
        github.wait_idle()

    reminders = [body for body in github.said(issue=5) if "Reminder:" in body]
    assert reminders == ["@octo-boss Reminder: Approve refund_charge? Reply `/approve` or `/deny <note>`."] * 2
    looked_up = [path for method, path in github.fake.calls if method == "GET" and "/user/" in path]
    assert sorted(looked_up) == sorted(["/user/4242", "/user/999", "/user/999"])  # a login found is reused
