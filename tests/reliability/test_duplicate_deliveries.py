"""One delivery sent 200 times at once on each channel (Slack, Twilio, GitHub: signed, the same platform id, to a
live gateway over HTTP) has one effect: the approval settles once, the tool runs once, each person is answered
once, and every copy gets a 2xx (a platform that got an error would send it yet again)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from sqlalchemy import select

from engine.store.tables import Inbound, ResponseCandidate
from tests.github.support import ALICE as GITHUB_ALICE
from tests.github.support import BOT, Github
from tests.reliability.conftest import Deployment
from tests.reliability.deliveries import Delivery, github_comment, slack_click, sms
from tests.slack.workspace import Workspace
from tests.support.agent import read_ledger, script
from tests.support.live_server import live_server
from tests.twilio.support import ALICE as TWILIO_ALICE
from tests.twilio.support import Sms

COPIES = 200
ISSUE = 7


def refund(charge: str) -> str:
    return script([("refund", {"charge_id": charge, "amount": 2})], final=f"refunded {charge}")


Waiting = tuple[str, Delivery, Callable[[], list[str]]]
"""A session waiting on alice's approval in a channel, her answer as the platform delivers it, and what the
channel has shown her so far."""


def on_slack(deployed: Deployment) -> Waiting:
    slack = Workspace(deployed.stack, deployed.slack)
    mention = slack.mention("alice", refund("ch_slack"))
    [card] = slack.cards(mention)
    return slack.session_of(mention), slack_click(slack, "alice", card, "Approve"), \
        lambda: [m.now["text"] for m in slack.thread(mention)]


def on_twilio(deployed: Deployment) -> Waiting:
    phone = Sms(deployed.stack, deployed.twilio)
    phone.text(TWILIO_ALICE, refund("ch_sms"))
    return phone.session_at(TWILIO_ALICE), sms(phone, TWILIO_ALICE, "1"), lambda: phone.inbox(TWILIO_ALICE)


def on_github(deployed: Deployment) -> Waiting:
    github = Github(deployed.stack, deployed.github.fake)
    github.comment(GITHUB_ALICE, f"@{BOT} {refund('ch_github')}", issue=ISSUE)
    return github.session(ISSUE), github_comment(github, GITHUB_ALICE, "/approve", ISSUE), \
        lambda: github.said(ISSUE)


@pytest.mark.parametrize("channel", [on_slack, on_twilio, on_github], ids=["slack", "twilio", "github"])
def test_one_delivery_sent_two_hundred_times_at_once_has_one_effect(
        deployed: Deployment, channel: Callable[[Deployment], Waiting]) -> None:
    stack = deployed.stack
    sid, delivery, said = channel(deployed)
    [request] = stack.pending(sid)

    with live_server(stack.app) as url:
        statuses = delivery.at_once(url, COPIES)
    stack.wait_idle()

    assert len(statuses) == COPIES and all(200 <= status < 300 for status in statuses), sorted(set(statuses))
    with stack.rt.db.read() as db:
        [stored] = db.execute(select(Inbound).where(Inbound.item.is_not(None), Inbound.processed_at.is_not(None))
                              .order_by(Inbound.id.desc()).limit(1)).scalars()
        candidates = db.execute(select(ResponseCandidate.outcome)
                                .where(ResponseCandidate.request_id == request["requestId"])).scalars().all()
    assert stored.duplicates == COPIES - 1
    assert candidates == ["allowed"]
    assert stack.turn(sid)["status"] == "completed"
    assert len([e for e in read_ledger() if e["tool"] == "refund"]) == 1
    assert len([text for text in said() if text and "refunded" in text]) == 1, said()
