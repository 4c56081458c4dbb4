"""SlackChannel against the fake Web API: where it posts, what a failure means, and that a retried delivery
job never posts twice."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta

import pytest

from adapters.slack import BotToken, SlackApiError, SlackChannel, SlackClient
from engine.channels.contract import ChannelRefused, ChannelUnavailable, QueuePosition
from engine.channels.delivery import deliver
from engine.jobs.recovery import sweep
from engine.policies import SessionInfo
from engine.protocol import InputRequestOut, api_key_principal
from engine.store.queries import list_sessions
from tests.slack.workspace import TOKEN, Workspace
from tests.support.agent import script
from tests.support.fake_slack import FakeSlack

THREAD = SessionInfo(id="ses_1", agent="a", channel="slack", address="slack::C0TEST:1700000000.000100",
                     initiator=None)
CHANNEL_ONLY = SessionInfo(id="ses_2", agent="a", channel="slack", address="slack::C0TEST:", initiator=None)
REQUEST = InputRequestOut.model_validate({
    "requestId": "req_1", "sessionId": "ses_1", "turnId": "turn_1", "kind": "tool-approval",
    "prompt": "Approve refund?", "action": None, "options": [{"id": "approve", "label": "Approve"}],
    "allowFreeform": False, "display": "confirmation", "requestedBy": None,
    "createdAt": datetime(2026, 1, 1, tzinfo=UTC), "expiresAt": None, "status": "pending", "outcome": None})
FIRST = QueuePosition(1, 1)


@pytest.fixture
def channel(fake: FakeSlack) -> SlackChannel:
    return SlackChannel(SlackClient(BotToken(TOKEN), fake.url))


def test_a_card_goes_into_the_sessions_thread_and_its_ref_is_channel_and_ts(channel: SlackChannel,
                                                                             fake: FakeSlack) -> None:
    ref = channel.show(THREAD, REQUEST, FIRST)
    [posted] = fake.messages
    assert ref == f"C0TEST|{posted.ts}"
    assert (posted.channel, posted.thread_ts) == ("C0TEST", "1700000000.000100")
    assert fake.called("chat.postMessage")[0].token == TOKEN
    channel.update(THREAD, REQUEST.model_copy(update={"status": "resolved", "outcome": "ignored"}), ref)
    assert fake.called("chat.update")[0].params["ts"] == posted.ts


def test_a_session_without_a_thread_posts_in_the_channel(channel: SlackChannel, fake: FakeSlack) -> None:
    channel.say(CHANNEL_ONLY, "hello")
    [call] = fake.called("chat.postMessage")
    assert "thread_ts" not in call.params


def test_a_rate_limit_is_a_channel_unavailable_with_retry_after(channel: SlackChannel, fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=429, retry_after=7)
    with pytest.raises(ChannelUnavailable) as raised:
        channel.show(THREAD, REQUEST, FIRST)
    assert raised.value.retry_after == 7.0


def test_slack_down_is_a_channel_unavailable(channel: SlackChannel, fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=503, error="service_unavailable")
    with pytest.raises(ChannelUnavailable):
        channel.say(THREAD, "hi")
    unreachable = SlackChannel(SlackClient(BotToken(TOKEN), "http://127.0.0.1:9/"))
    with pytest.raises(ChannelUnavailable, match="unreachable"):
        unreachable.say(THREAD, "hi")
    fake.fail("chat.postMessage", status=200, error="internal_error")  # Slack's "likely a transient issue"
    with pytest.raises(ChannelUnavailable, match="internal_error"):
        channel.say(THREAD, "hi")


def test_other_errors_are_slack_api_errors_with_slacks_code(channel: SlackChannel, fake: FakeSlack) -> None:
    fake.fail("chat.postMessage", status=200, error="channel_not_found")
    with pytest.raises(SlackApiError) as raised:
        channel.show(THREAD, REQUEST, FIRST)
    assert (raised.value.code, raised.value.method) == ("channel_not_found", "chat.postMessage")
    assert isinstance(raised.value, ChannelRefused)  # for good: delivery goes on without it


def test_a_card_that_cannot_be_updated_or_a_refusal_that_cannot_be_told_does_not_stop_delivery(
        channel: SlackChannel, fake: FakeSlack, caplog: pytest.LogCaptureFixture) -> None:
    fake.fail("chat.postEphemeral", status=200, error="user_not_in_channel")
    with caplog.at_level(logging.WARNING):
        channel.update(THREAD, REQUEST, "C0TEST|1600000000.000001")  # deleted meanwhile: message_not_found
        bob = api_key_principal("bob").model_copy(update={"authenticator": "slack", "attributes": {"userId": "UBOB"}})
        channel.refuse(THREAD, REQUEST, bob, "no")
    assert "message_not_found" in caplog.text and "user_not_in_channel" in caplog.text
    channel.refuse(THREAD, REQUEST, api_key_principal("bob"), "no")  # not a Slack user: told by the API
    assert len(fake.called("chat.postEphemeral")) == 1


def test_an_api_address_is_a_slack_place(channel: SlackChannel) -> None:
    assert channel.address({"channel": "C0TEST", "threadTs": "1700000000.000100"}) == \
        "slack::C0TEST:1700000000.000100"
    assert channel.address({"channel": "C0TEST"}) == "slack::C0TEST:"
    for bad in ({}, {"channel": "#general"}, {"channel": "C0TEST", "threadTs": 1.5}, {"channel": "C1", "x": 1}):
        with pytest.raises(ValueError, match="a Slack address is"):
            channel.address(bad)


def test_a_rate_limited_delivery_waits_out_retry_after_then_posts_everything_once(slack: Workspace) -> None:
    slack.fake.fail("chat.postMessage", status=429, retry_after=30, times=1)
    slack.mention("alice", script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    [session] = list_sessions(slack.stack.rt)["sessions"]
    assert slack.fake.messages == [] and len(slack.fake.called("chat.postMessage")) == 1  # refused: come back in 30 s
    deliver(slack.stack.rt, session["id"])  # a retried job, or a sweep, within the 30 s: Slack is not called
    sweep(slack.stack.rt)
    assert slack.stack.rt.executor.join()  # type: ignore[attr-defined]
    assert len(slack.fake.called("chat.postMessage")) == 1
    later = slack.stack.rt.now() + timedelta(seconds=31)
    slack.stack.rt.clock = lambda: later
    assert sweep(slack.stack.rt).redelivered == 1  # after them, the sweep delivers what is missing
    assert slack.stack.rt.executor.join()  # type: ignore[attr-defined]
    deliver(slack.stack.rt, session["id"])  # and one more, for good measure
    assert [m.now["text"] for m in slack.fake.messages] == ["step 1", "Approve refund?"]


def test_a_post_slack_refuses_for_good_is_logged_once_and_the_session_goes_on(
        slack: Workspace, caplog: pytest.LogCaptureFixture) -> None:
    slack.fake.fail("chat.postMessage", status=200, error="not_in_channel", times=2)  # the bot is not invited yet
    client = slack.stack.client("alice")
    with caplog.at_level(logging.ERROR):
        created = client.post("/api/sessions", json={
            "message": script([("refund", {"charge_id": "ch_1", "amount": 5})]), "channel": "slack",
            "address": {"channel": "C0TEST"}})
        slack.wait_idle()
    session_id = created.get_json()["id"]
    [request] = slack.stack.pending(session_id)
    assert slack.fake.messages == [] and len(slack.fake.called("chat.postMessage")) == 2  # "step 1", the card
    [error] = [r.getMessage() for r in caplog.records if request["requestId"] in r.getMessage()]
    assert session_id in error and "slack" in error and "not_in_channel" in error
    assert sweep(slack.stack.rt).redelivered == 0  # nothing left to retry
    slack.wait_idle()
    assert len(slack.fake.called("chat.postMessage")) == 2
    answered = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})
    assert answered.status_code == 200, answered.get_json()
    slack.wait_idle()  # the bot was invited meanwhile: the agent's answer reaches the channel
    [answer] = slack.fake.messages
    assert answer.now["text"].startswith("done")
