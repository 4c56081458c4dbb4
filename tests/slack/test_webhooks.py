"""`/slack/events` and `/slack/interactions`: verified before anything, deduplicated before any effect, and
only a person's words or clicks become inbound items."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from sqlalchemy import func, select

from engine.store.tables import Inbound, Outbox, Session, Turn
from tests.slack.workspace import SECRET, Workspace, fixture
from tests.support.agent import script
from tests.support.signing import slack_headers

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 5})])


def counts(slack: Workspace) -> dict[str, int]:
    with slack.stack.rt.db.read() as db:
        return {table.__tablename__: db.execute(select(func.count()).select_from(table)).scalar_one()
                for table in (Inbound, Outbox, Session, Turn)}


NOTHING = {"inbound": 0, "outbox": 0, "sessions": 0, "turns": 0}


def signed_mention(slack: Workspace, timestamp: float | None = None) -> tuple[str, dict[str, str]]:
    body = json.dumps(slack.event("app_mention", "alice", f"<@UBOT> {REFUND}"))
    return body, slack_headers(SECRET, body, timestamp=timestamp)


def post(slack: Workspace, body: str, headers: dict[str, str]) -> int:
    return slack.http.post("/slack/events", data=body, headers=headers).status_code


def test_a_forged_signature_is_refused_and_changes_nothing(slack: Workspace) -> None:
    body, headers = signed_mention(slack)
    forged = slack_headers("not-the-secret", body)
    assert post(slack, body, forged) == 401
    assert post(slack, body.replace("UALICE", "UBOB"), headers) == 401  # a body altered after signing
    assert post(slack, body, {"Content-Type": "application/json"}) == 401  # no signature at all
    slack.wait_idle()
    assert counts(slack) == NOTHING
    assert [c.method for c in slack.fake.calls] == ["auth.test"]  # once, when the gateway started


def test_a_stale_request_is_refused_and_changes_nothing(slack: Workspace) -> None:
    body, headers = signed_mention(slack, timestamp=time.time() - 400)
    response = slack.http.post("/slack/events", data=body, headers=headers)
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "invalid_signature"
    slack.wait_idle()
    assert counts(slack) == NOTHING


def test_a_request_signed_within_the_window_is_taken(slack: Workspace) -> None:
    body, headers = signed_mention(slack, timestamp=time.time() - 290)
    assert post(slack, body, headers) == 200
    slack.wait_idle()
    assert counts(slack)["turns"] == 1


def test_a_replayed_request_changes_nothing_more(slack: Workspace) -> None:
    body, headers = signed_mention(slack)
    assert post(slack, body, headers) == 200
    slack.wait_idle()
    before = counts(slack)
    assert post(slack, body, headers) == 200  # the same signed bytes again, within the window
    slack.wait_idle()
    assert counts(slack) == before and before["turns"] == 1


def test_event_retries_are_deduplicated_by_event_id(slack: Workspace) -> None:
    payload = slack.event("app_mention", "alice", f"<@UBOT> {REFUND}")
    for retry in ("1", "2", "3"):  # Slack's retries arrive freshly signed, with the same event_id
        response = slack.send_event(payload, **{"X-Slack-Retry-Num": retry, "X-Slack-Retry-Reason": "http_timeout"})
        assert response.status_code == 200
    slack.ok(slack.send_event(payload))
    assert counts(slack)["inbound"] == 1 and counts(slack)["turns"] == 1
    [mention] = slack.fake.called("chat.postMessage")[:1]
    assert mention.params["thread_ts"] == payload["event"]["ts"]


def test_a_mention_slack_also_sends_as_a_message_starts_one_turn(slack: Workspace) -> None:
    mention = slack.event("app_mention", "alice", f"<@UBOT> {REFUND}")
    copy = slack.event("message", "alice", f"<@UBOT> {REFUND}")  # message.channels: its own event id
    copy["event"].update(ts=mention["event"]["ts"], event_ts=mention["event"]["ts"])
    slack.ok(slack.send_event(mention))
    slack.ok(slack.send_event(copy))
    assert counts(slack)["inbound"] == 1 and counts(slack)["turns"] == 1


def test_slack_gets_its_answer_even_when_its_web_api_is_down(slack: Workspace) -> None:
    """Listeners store and acknowledge; every Web API call happens later, in a job."""
    slack.fake.fail("*", status=503, error="service_unavailable", times=10**6)
    slack.ok(slack.send_event(slack.event("app_mention", "alice", f"<@UBOT> {REFUND}")))
    assert counts(slack)["turns"] == 1 and slack.fake.messages == []
    with slack.stack.rt.db.read() as db:
        delivered, written = db.execute(select(Session.delivered_seq, Session.event_seq)).one()
    assert delivered < written  # the rest waits for Slack (a retry, or the next sweep)


def test_a_replayed_click_is_one_inbound_item(slack: Workspace) -> None:
    mention = slack.mention("alice", REFUND)
    [card] = slack.cards(mention)
    click = slack.click_payload("bob", card, "Approve")
    for _ in range(2):
        assert slack.send_interaction(click).status_code == 200
    slack.wait_idle()
    assert counts(slack)["inbound"] == 2  # the mention and one click
    assert len(slack.fake.ephemerals) == 1


@pytest.mark.parametrize("name,fields", [
    ("message_bot_message", {}),  # another app's post
    ("message_changed", {}),  # an edit
    ("message", {"bot_id": "BBOT"}),  # the bot's own post
    ("message", {"subtype": "channel_join"}),
    ("message", {"thread_ts": "1600000000.000001"}),  # a thread no session lives in
    ("app_mention", {"bot_id": "B0OTHER"}),  # another app (or a workflow) mentioning the bot
])
def test_messages_that_are_not_a_person_writing_to_a_session_are_ignored(
        slack: Workspace, name: str, fields: dict[str, Any]) -> None:
    mention = slack.mention("alice", REFUND)
    before = counts(slack)
    payload = slack.event(name, "alice", "approve", thread_ts=mention["ts"])
    payload["event"].update(fields)
    slack.ok(slack.send_event(payload))
    assert counts(slack) == before


def test_top_level_channel_chatter_is_ignored(slack: Workspace) -> None:
    slack.ok(slack.send_event(slack.event("message", "alice", "lunch?")))
    assert counts(slack) == NOTHING


def test_a_direct_message_is_a_session_of_its_own(slack: Workspace) -> None:
    payload = slack.event("message_im", "alice", REFUND, channel="D0ALICE")
    slack.ok(slack.send_event(payload))
    [card] = [m for m in slack.fake.messages if m.versions[0]["blocks"]]
    assert (card.channel, card.thread_ts) == ("D0ALICE", None)
    with slack.stack.rt.db.read() as db:
        assert db.execute(select(Session.address)).scalar_one() == "slack::D0ALICE:"


def test_the_url_verification_challenge_is_answered(slack: Workspace) -> None:
    response = slack.send_event(fixture("url_verification"))
    assert response.status_code == 200
    assert response.get_json() == {"challenge": fixture("url_verification")["challenge"]}


def test_subscribed_events_without_work_are_acknowledged(slack: Workspace) -> None:
    """An unanswered event would be a 404 from Bolt, and Slack would retry it."""
    assert slack.send_event(fixture("app_uninstalled")).status_code == 200
    assert counts(slack) == NOTHING


def test_a_click_on_a_control_of_another_app_is_a_404(slack: Workspace) -> None:
    payload = fixture("block_actions")  # action_id "a": not one of this gateway's controls
    assert slack.send_interaction(payload).status_code == 404
    assert counts(slack) == NOTHING


def test_a_malformed_click_on_our_control_is_a_400_and_changes_nothing(slack: Workspace) -> None:
    payload = fixture("block_actions")
    payload["actions"][0].update(action_id="hitl|req_x|1", value="approve")  # values are option numbers
    assert slack.send_interaction(payload).status_code == 400
    assert counts(slack) == NOTHING


@pytest.mark.parametrize("path,body,content_type", [
    ("/slack/events", "{not json", "application/json"),
    ("/slack/interactions", "payload=%7Bnot+json", "application/x-www-form-urlencoded"),
])
def test_a_signed_body_that_is_not_json_is_a_400_and_changes_nothing(
        slack: Workspace, path: str, body: str, content_type: str) -> None:
    response = slack.http.post(path, data=body, headers=slack_headers(SECRET, body, content_type=content_type))
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_payload"
    assert counts(slack) == NOTHING


def test_a_click_on_an_unknown_request_is_kept_for_audit_only(slack: Workspace) -> None:
    payload = fixture("block_actions")
    payload["actions"][0].update(action_id="hitl|req_unknown|1", value="1")
    slack.ok(slack.send_interaction(payload))
    assert {k: v for k, v in counts(slack).items() if v} == {"inbound": 1}
