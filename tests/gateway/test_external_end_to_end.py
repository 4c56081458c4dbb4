"""Agents that run elsewhere, end to end on PostgreSQL + Redis + a real `hitl worker` (with Slack, Twilio and the
callback secret configured): gateway.client asks over HTTP, people answer on Slack and by SMS, the worker delivers
prompts and the signed callback."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from standardwebhooks import Webhook

from gateway.client import Answer, HitlClient
from tests.conftest import KEYS, make_stack, own_worker
from tests.slack.workspace import CHANNEL, USERS, Workspace, fresh_job_ids, shared_fake, slack_settings
from tests.support.fake_slack import TEAM, Message
from tests.support.hooks import Hooks, hook_server
from tests.support.live_server import live_server
from tests.twilio.support import ALICE, Sms, fake_twilio, twilio_env, twilio_settings

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


def everywhere_queue(request: pytest.FixtureRequest, swept: bool = True) -> str:
    """One worker for these tests: Slack and Twilio against their fakes, and the callback secret; it sweeps every
    second. Not `swept`: another such worker, which never sweeps during a test (for a test that sweeps itself with
    its runtime's clock moved, which the worker's own sweep must not beat to an escalation)."""
    return own_worker(request, "anywhere" if swept else "anywhere-unswept", SLACK_BOT_TOKEN="xoxb-test-token",
                      SLACK_SIGNING_SECRET="test-signing-secret", SLACK_API_URL=shared_fake(request).url,
                      HITL_CALLBACK_SECRET=SECRET, **twilio_env(fake_twilio(request).url),
                      **({} if swept else {"HITL_SWEEP_SECONDS": "3600"}))


@pytest.fixture
def place(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Workspace, Sms, str]]:
    """The gateway on a real port, with Slack and SMS people, and its URL."""
    slack, sms = shared_fake(request), fake_twilio(request)
    slack.reset()
    sms.reset()
    settings = {**slack_settings(slack), **twilio_settings(sms.url), "callback_secret": SECRET,
                "queue": everywhere_queue(request)}
    with make_stack(request, "postgres", tmp_path, **settings) as stack, live_server(stack.app) as url:
        fresh_job_ids(stack)
        yield Workspace(stack, slack), Sms(stack, sms), url


def card_in(slack: Workspace, channel: str) -> Message:
    return slack.fake.wait_for(lambda: next((m for m in slack.fake.messages if m.channel == channel
                                             and m.versions[0]["blocks"]), None), what="the request's card")


def test_an_approval_shown_on_slack_is_settled_by_its_named_approver_and_called_back(
        place: tuple[Workspace, Sms, str]) -> None:
    slack, _, url = place
    hitl = HitlClient(url, api_key=KEYS["bot:agent"])
    bob = f"slack:{TEAM}:{USERS['bob']}"
    with hook_server() as hooks:
        req = hitl.request_approval(tool="refund_charge", input={"charge": "ch_1001", "amount": 20},
                                    to={"channel": "slack", "address": {"channel": CHANNEL}}, approvers=[bob],
                                    callback_url=hooks.url, idempotency_key="refund-ch_1001-20")
        card = card_in(slack, CHANNEL)
        controls = [e["text"]["text"] for b in card.now["blocks"] if b["type"] == "actions" for e in b["elements"]]
        assert controls == ["Approve", "Deny"] and "Approve refund_charge?" in card.now["text"]

        slack.ok(slack.click("alice", card, "Approve"))  # not named: told so, and it stays open
        assert hitl.get(req["requestId"])["status"] == "pending"
        assert [e.user for e in slack.fake.ephemerals] == [USERS["alice"]]
        slack.ok(slack.click("bob", card, "Approve"))
        settled = hitl.wait(req["requestId"], timeout=30)

        assert (settled["outcome"], settled["responder"]["principalId"]) == ("approved", bob)
        assert f"Approved by <@{USERS['bob']}>" in card.now["text"]
        sent = delivered(hooks, hitl, req["requestId"])
    payload = Webhook(SECRET).verify(sent.body, sent.headers)
    assert (payload["type"], payload["request"]["requestId"], payload["request"]["outcome"]) == (
        "input.resolved", req["requestId"], "approved")
    assert payload["request"]["idempotencyKey"] == "refund-ch_1001-20"


def delivered(hooks: Hooks, hitl: HitlClient, request_id: str) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if hooks.received and hitl.get(request_id)["callback"]["status"] == "delivered":
            [sent] = hooks.received
            return sent
        time.sleep(0.05)
    raise AssertionError(f"no callback delivered: {hitl.get(request_id)['callback']}")


def test_a_question_texted_to_a_number_is_answered_by_that_number(place: tuple[Workspace, Sms, str]) -> None:
    _, sms, url = place
    answers: list[Answer] = []
    asking = threading.Thread(target=lambda: answers.append(HitlClient(url, api_key=KEYS["bot:agent"]).ask(
        "Which plan?", options=["Basic", "Pro"], to={"channel": "twilio", "address": {"to": ALICE}}, timeout=60)))

    asking.start()
    deadline = time.monotonic() + 30
    while not sms.inbox(ALICE) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sms.inbox(ALICE) == ["Which plan?\n1. Basic\n2. Pro\nReply with a number or your answer."]
    sms.text(ALICE, "2")
    asking.join(30)

    [answer] = answers
    assert (answer.option_id, answer.label, answer.text) == ("Pro", "Pro", None)
    assert answer.responder is not None and answer.responder["principalId"] == f"twilio:{ALICE}"
    assert sms.inbox(ALICE)[1:] == ["Which plan? Answered: Pro (by alice)."]
