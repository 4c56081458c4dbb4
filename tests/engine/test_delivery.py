"""deliver(session_id): events drive a channel adapter; each post happens once, in order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any
from unittest.mock import ANY

import pytest
from sqlalchemy import func, select

from engine.channels.contract import SHOWN_EVENTS, Choice
from engine.channels.delivery import Delivery, Pending, claim, deliver, release
from engine.channels.inbound import accept
from engine.jobs.perform import IMPLEMENTATIONS, perform
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.policies import SessionInfo
from engine.protocol import api_key_principal
from engine.store.events import emit
from engine.store.tables import Event, Session
from engine.turns.sessions import open_session
from tests.conftest import Stack, recorded, sqlite_settings
from tests.support.agent import script, steered, thinking, wait_for
from tests.support.fake_channel import RecordingChannel

REFUNDS = script([("refund", {"charge_id": "a", "amount": 1}), ("refund", {"charge_id": "b", "amount": 2})])


@pytest.fixture
def channel_stack(tmp_path: Path) -> Iterator[tuple[Stack, RecordingChannel]]:
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    channel = RecordingChannel()
    stack.rt.channels["fake"] = channel
    yield stack, channel
    stack.close()


def answered_away(stack: Stack, channel: RecordingChannel, sid: str, *request_ids: str) -> None:
    """Approve requests while the channel is away: their events wait, undelivered."""
    stack.rt.channels.pop("fake")
    for request_id in request_ids:
        stack.answer(request_id, "approve")
    stack.wait_idle()
    stack.rt.channels["fake"] = channel


def start(stack: Stack) -> str:
    opened = open_session(stack.rt, api_key_principal("alice"), channel="fake", address="fake:room:1",
                          message=REFUNDS)
    stack.wait_idle()
    return opened.session_id


def test_every_open_request_is_shown_once_then_settled(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = channel_stack
    sid = start(stack)
    first, second = stack.pending(sid)
    assert [c[:2] for c in channel.calls if c[0] == "show"] == [("show", first["requestId"]),
                                                               ("show", second["requestId"])]
    stack.answer(first["requestId"], "approve")
    stack.answer(second["requestId"], "cancel", text="no")
    updates = [c for c in channel.calls if c[0] == "update"]
    assert updates == [("update", first["requestId"], "approved", "ref-2"),
                       ("update", second["requestId"], "denied", "ref-3")]
    assert channel.calls[0] == ("say", "step 1")
    assert channel.calls[-1][0] == "say" and channel.calls[-1][1].startswith("done")
    deliver(stack.rt, sid)  # a retried job posts nothing again
    assert len([c for c in channel.calls if c[0] == "show"]) == 2


def test_a_text_channel_shows_one_request_at_a_time(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = channel_stack
    channel.one_at_a_time = True
    sid = start(stack)
    first, second = stack.pending(sid)
    assert [c for c in channel.calls if c[0] == "show"] == [("show", first["requestId"], 1, 2)]
    stack.answer(first["requestId"], "approve")
    assert [c for c in channel.calls if c[0] == "show"][-1] == ("show", second["requestId"], 1, 1)


def test_a_refused_responder_is_told(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = channel_stack
    sid = start(stack)
    first, _ = stack.pending(sid)
    stack.answer(first["requestId"], "approve", who="bob")
    assert ("refuse", first["requestId"], "bob", "only alice may answer this request") in channel.calls


def test_a_failed_post_is_retried_by_sweep_without_posting_twice(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = channel_stack
    channel.down = True
    sid = start(stack)
    assert [c for c in channel.calls if c[0] == "show"] == []  # every show failed; so did the jobs
    channel.down = False
    report = sweep(stack.rt)
    stack.wait_idle()
    assert report.redelivered >= 1
    shows = [c[1] for c in channel.calls if c[0] == "show"]
    assert len(shows) == 2 and len(set(shows)) == 2
    assert len(stack.pending(sid)) == 2


def test_a_delivery_cut_short_keeps_the_cursor_past_what_it_handed_over(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """The cursor moves once, when the lease is let go: after a failed post it stands just before the event
    that failed, so a retry starts there and the lease is free for it."""
    stack, channel = channel_stack
    channel.down = True
    sid = start(stack)
    with stack.rt.db.read() as db:
        session = db.get_one(Session, sid)
        requested = db.execute(select(func.min(Event.seq)).where(
            Event.session_id == sid, Event.type == "input.requested")).scalar_one()
        assert (session.delivered_seq, session.delivery_lease_until) == (requested - 1, None)
    assert channel.calls == [("say", "step 1")]


def test_a_delivery_reads_in_the_transaction_that_takes_its_lease(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """The events, the requests they name, the open requests and the posts already made are read with the
    lease; the last post made is recorded with the cursor when the lease is let go."""
    stack, channel = channel_stack
    sid = start(stack)
    first, second = stack.pending(sid)
    answered_away(stack, channel, sid, first["requestId"])
    with recorded(stack.rt.db.engine, "commit") as commits:
        deliver(stack.rt, sid)

    assert [c for c in channel.calls if c[0] == "update"] == [("update", first["requestId"], "approved", "ref-2")]
    assert [c[1] for c in channel.calls if c[0] == "show"] == [first["requestId"], second["requestId"]]
    assert len(commits) == 2  # the lease and the reads; the settled card's post with the cursor


def test_a_transaction_holding_its_session_queues_the_delivery_in_its_own_update_of_the_session(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """The answers and the turn they resume lock the session row: its delivery flag is read and set there,
    with no statement of its own, and every event is still delivered."""
    stack, channel = channel_stack
    sid = start(stack)
    first, second = stack.pending(sid)
    with recorded(stack.rt.db.engine, "before_cursor_execute") as statements:
        stack.answer(first["requestId"], "approve")
        stack.answer(second["requestId"], "approve")
        stack.wait_idle()

    assert stack.turn(sid)["status"] == "completed"
    assert not [s for s in statements if "SET delivery_queued" in s and "sessions.channel IN" in s]
    assert [c[1] for c in channel.calls if c[0] == "update"] == [first["requestId"], second["requestId"]]
    assert channel.calls[-1][0] == "say" and channel.calls[-1][1].startswith("done")


def test_a_delivery_with_nothing_past_the_cursor_only_clears_its_flag(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """A job queued while another deliverer went on and handed its events over finds nothing to do: its claim
    takes no lease, its flag is cleared all the same, and nothing is read or posted."""
    stack, channel = channel_stack
    sid = start(stack)
    posted = list(channel.calls)
    with stack.rt.transaction() as db:
        db.get_one(Session, sid).delivery_queued = True
    with recorded(stack.rt.db.engine, "before_cursor_execute") as statements:
        deliver(stack.rt, sid)

    updates = [s for s in statements if not s.startswith("BEGIN")]  # the claim's, then the flag's alone
    assert len(updates) == 2 and all(s.startswith("UPDATE sessions SET") for s in updates)
    with stack.rt.db.read() as db:
        session = db.get_one(Session, sid)
        assert (session.delivery_queued, session.delivery_lease_until) == (False, None)
    assert channel.calls == posted


def test_a_delivery_takes_its_lease_and_reads_its_session_in_one_statement(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """The claim clears the queued flag, takes the lease and reads the session row in one UPDATE; a second
    deliverer finds the lease taken and leaves the events to the first."""
    stack, channel = channel_stack
    sid = start(stack)
    first, _ = stack.pending(sid)
    answered_away(stack, channel, sid, first["requestId"])
    with recorded(stack.rt.db.engine, "before_cursor_execute") as statements:
        pending = claim(stack.rt, sid)
    assert pending is not None and pending.events
    assert [s.split()[0] for s in statements if not s.startswith("BEGIN")][:2] == ["UPDATE", "SELECT"]
    assert "FROM sessions" not in " ".join(statements)
    assert claim(stack.rt, sid) is None  # the lease is taken
    release(stack.rt, sid, pending.events[-1].seq, [])
    with stack.rt.db.read() as db:
        session = db.get_one(Session, sid)
        assert (session.delivered_seq, session.delivery_lease_until) == (session.event_seq, None)


def test_the_api_opens_a_session_at_a_channel_place(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    stack, channel = channel_stack
    client = stack.client("alice")
    created = client.post("/api/sessions", json={"message": REFUNDS, "channel": "fake", "address": {"room": "r9"}})
    assert created.status_code == 201
    stack.wait_idle()
    session = client.get(f"/api/sessions/{created.get_json()['id']}").get_json()
    assert (session["channel"], session["address"]) == ("fake", "fake:r9:")
    assert len([c for c in channel.calls if c[0] == "show"]) == 2

    bad = client.post("/api/sessions", json={"message": "hi", "channel": "fake", "address": {"nope": 1}})
    assert (bad.status_code, bad.get_json()["error"]["code"]) == (422, "invalid_address")
    unknown = client.post("/api/sessions", json={"message": "hi", "channel": "pager", "address": {}})
    assert (unknown.status_code, unknown.get_json()["error"]["code"]) == (422, "unknown_channel")
    half = client.post("/api/sessions", json={"message": "hi", "channel": "fake"})
    assert half.status_code == 400
    assert len(client.get("/api/sessions").get_json()["sessions"]) == 1


def answered_offline(stack: Stack, channel: RecordingChannel) -> str:
    """A session whose two approvals were answered while its channel was away: the turn completed, and its
    delivery has both cards to settle and the answer to say."""
    sid = start(stack)
    first, second = stack.pending(sid)
    answered_away(stack, channel, sid, first["requestId"], second["requestId"])
    return sid


@pytest.mark.parametrize(("update_edits", "expected_commits"), [(True, 2), (False, 4)])
def test_card_edits_are_recorded_with_the_next_post_they_precede(
        channel_stack: tuple[Stack, RecordingChannel], update_edits: bool, expected_commits: int) -> None:
    """Settling a card that edits it in place (Slack, GitHub) can be repeated harmlessly, so its record waits
    for the next one; a settle that posts anew (an SMS) is recorded before the next post is made."""
    stack, channel = channel_stack
    channel.update_edits = update_edits
    sid = answered_offline(stack, channel)
    with recorded(stack.rt.db.engine, "commit") as commits:
        deliver(stack.rt, sid)

    assert [c[0] for c in channel.calls[-3:]] == ["update", "update", "say"]
    assert len(commits) == expected_commits  # the lease; each record a post waits for; the cursor
    deliver(stack.rt, sid)
    assert [c[0] for c in channel.calls].count("update") == 2


def test_a_failed_post_still_records_the_edits_made_before_it(
        channel_stack: tuple[Stack, RecordingChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    stack, channel = channel_stack
    channel.update_edits = True
    sid = answered_offline(stack, channel)
    say = channel.say

    def down(*_: object) -> str:
        raise RuntimeError("the platform is down")

    monkeypatch.setattr(channel, "say", down)
    with pytest.raises(RuntimeError):
        deliver(stack.rt, sid)
    monkeypatch.setattr(channel, "say", say)
    deliver(stack.rt, sid)

    assert [c[0] for c in channel.calls].count("update") == 2  # not repeated by the retry
    assert channel.calls[-1][0] == "say" and channel.calls[-1][1].startswith("done")


@pytest.mark.parametrize("one_at_a_time", [True, False])
def test_requests_a_steer_led_to_are_shown_after_what_the_model_said_before_them(
        channel_stack: tuple[Stack, RecordingChannel], one_at_a_time: bool) -> None:
    """Delivered late, the events of a steer close the shown prompts, then the model speaks, then it asks again:
    the new request is shown at its own input.requested, never at the input.resolved before it."""
    stack, channel = channel_stack
    channel.one_at_a_time = one_at_a_time
    sid = start(stack)
    first, second = stack.pending(sid)
    stack.rt.channels.pop("fake")
    stack.say(sid, script([("deploy", {"env": "staging"})]))
    stack.rt.channels["fake"] = channel
    [deploy] = stack.pending(sid)
    del channel.calls[:]
    deliver(stack.rt, sid)
    shown = [first["requestId"]] if one_at_a_time else [first["requestId"], second["requestId"]]
    assert channel.calls == [*[("update", r, "ignored", ANY) for r in shown], ("say", "step 1"),
                             ("show", deploy["requestId"], 1, 1)]


class AtOnce:
    """An executor that runs each job in the thread that pushes it, when it is pushed: a delivery then runs
    between any two transactions of the code that pushed it."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        perform(runtime, job, outbox_id, args)

    def waiting_since(self) -> None:
        return None


def test_requests_that_expire_together_close_together_and_only_the_next_open_one_is_shown(
        channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """A sweep finds both refunds overdue: a text channel never shows the second between their expiries."""
    stack, channel = channel_stack
    channel.one_at_a_time = True
    opened = open_session(stack.rt, api_key_principal("alice"), channel="fake", address="fake:room:1",
                          message=script([("refund", {"charge_id": "a", "amount": 1}),
                                          ("refund", {"charge_id": "b", "amount": 2}), ("deploy", {"env": "prod"})]))
    stack.wait_idle()
    first, second, deploy = stack.pending(opened.session_id)
    stack.rt.executor = AtOnce()
    now = stack.rt.clock()
    stack.rt.clock = lambda: now + timedelta(minutes=11)
    assert sweep(stack.rt).expired == 2
    assert [c for c in channel.calls if c[0] in ("show", "update")] == [
        ("show", first["requestId"], 1, 3), ("update", first["requestId"], "expired", ANY),
        ("show", deploy["requestId"], 1, 1)]


def documented_event_types() -> set[str]:
    """The event types of docs/protocol.md's table of events (the code spans of its first column)."""
    table = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text()
    return {span for row in re.findall(r"^\| (`[a-z]+\.[a-z]+`.*?) \|", table, re.MULTILINE)
            for span in re.findall(r"`([a-z]+\.[a-z]+)`", row)}


def test_only_the_events_a_channel_shows_queue_a_delivery(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """Delivery turns only SHOWN_EVENTS into posts, so a transaction that writes none of them (a turn started, a
    call's result) queues no delivery; the next delivery passes over them, and the cursor ends past them all."""
    stack, channel = channel_stack
    documented = documented_event_types()
    assert SHOWN_EVENTS <= documented and "turn.started" in documented
    pending = Pending(channel, SessionInfo("s", "agent", "fake", "fake:room:1", None), [])
    anything = {"text": "hi", "error": {"message": "no"}, "outcome": "rejected", "approvals": {"have": 1},
                "resolutions": [], "requestId": "r", "requests": [], "result": {}}
    for type_ in sorted(documented - SHOWN_EVENTS):
        Delivery(stack.rt, channel, "s", pending).handle(Event(session_id="s", seq=1, type=type_, data=anything))
    assert channel.calls == [] and pending.unrecorded == []

    sid = start(stack)
    first, second = stack.pending(sid)
    with recorded(stack.rt.db.engine, "before_cursor_execute") as statements, \
            stack.rt.transaction() as db:  # as a turn's claim: it writes only turn.started
        emit(db, sid, "turn.started", {"runId": "run_x"}, turn_id=None, at=stack.rt.now())
    assert not [s for s in statements if s.startswith("INSERT INTO outbox")]
    with stack.rt.db.read() as db:
        assert db.get_one(Session, sid).delivered_seq == db.get_one(Session, sid).event_seq - 1

    stack.answer(first["requestId"], "approve")
    stack.answer(second["requestId"], "approve")
    with stack.rt.db.read() as db:
        session = db.get_one(Session, sid)
        assert session.delivered_seq == session.event_seq and not session.delivery_queued
    assert channel.calls[-1][0] == "say" and channel.calls[-1][1].startswith("done")


def test_a_click_its_card_and_the_turn_it_resumes_are_one_job(
        channel_stack: tuple[Stack, RecordingChannel], monkeypatch: pytest.MonkeyPatch) -> None:
    """The job that applies a click runs the turn it resumes, then delivers the card's update and what the turn
    said at once: one job, nothing more through the queue, one delivery."""
    stack, channel = channel_stack
    sid = start(stack)
    first, second = stack.pending(sid)
    stack.answer(first["requestId"], "approve")
    submitted: list[str] = []
    submit = stack.rt.executor.submit

    def counted(runtime: Runtime, job: str, *args: Any, **kwargs: Any) -> None:
        submitted.append(job)
        submit(runtime, job, *args, **kwargs)

    monkeypatch.setattr(stack.rt.executor, "submit", counted)
    delivered: list[str] = []
    monkeypatch.setitem(IMPLEMENTATIONS, "deliver", lambda rt, session_id: (delivered.append(session_id),
                                                                            deliver(rt, session_id)))
    calls = len(channel.calls)
    accept(stack.rt, "fake", "click-1", api_key_principal("alice"), b"{}", Choice(second["requestId"], 1))
    stack.wait_idle()

    assert stack.turn(sid)["status"] == "completed"
    assert submitted == ["process_inbound"]
    assert delivered == [sid]
    assert [c[0] for c in channel.calls[calls:]] == ["update", "say"]
    assert channel.calls[-1][1].startswith("done")


def test_a_slow_step_does_not_hold_back_the_card(channel_stack: tuple[Stack, RecordingChannel]) -> None:
    """While the resumed turn's model takes its time, the click's card is updated beside it (RIDE_AFTER_SECONDS);
    what the turn says is delivered when it has said it."""
    stack, channel = channel_stack
    opened = open_session(stack.rt, api_key_principal("alice"), channel="fake", address="fake:room:1",
                          message=script([("refund", {"charge_id": "a", "amount": 1})], think=True))
    stack.wait_idle()
    [request] = stack.pending(opened.session_id)
    calls = len(channel.calls)
    accept(stack.rt, "fake", "click-1", api_key_principal("alice"), b"{}", Choice(request["requestId"], 1))
    wait_for(thinking, 10, "the model to think")
    wait_for(lambda: any(c[0] == "update" for c in channel.calls[calls:]), 10, "the card's update")

    assert not [c for c in channel.calls[calls:] if c[0] == "say"]  # the model is still thinking
    steered()
    stack.wait_idle()
    assert [c[0] for c in channel.calls[calls:]] == ["update", "say"]
    assert stack.turn(opened.session_id)["status"] == "completed"
