"""Where a request is shown (issue 28): an agent's `show_to` and POST /api/requests' `to` show a request at more
places (a channel address, a person's direct conversation, each member of a group); it settles once, every place
then says the outcome, and answers after that are late answers. The first test runs end to end on PostgreSQL with a
real `hitl worker` (Slack and Twilio against their fakes); the others on SQLite with in-process jobs."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from engine import ApprovalPolicy
from engine.answers.showing import showing
from engine.people import save_group, save_person
from engine.store.queries import first_message, title_of
from tests.conftest import Stack, make_stack
from tests.gateway.test_external_end_to_end import everywhere_queue
from tests.slack.test_quorum import buttons, context_lines
from tests.slack.workspace import USERS, Workspace, fresh_job_ids, shared_fake, slack_settings
from tests.support.agent import SUPPORT_CHANNEL, read_ledger, script, wait_for
from tests.support.fake_slack import TEAM, Message
from tests.twilio.support import ALICE, BOB, Sms, fake_twilio, twilio_settings

BOBS_PHONE = f"twilio:{BOB}"
SLACK_ALICE = f"slack:{TEAM}:{USERS['alice']}"


@contextlib.contextmanager
def slack_and_sms(request: pytest.FixtureRequest, kind: str, tmp_path: Path,
                  swept: bool = True) -> Iterator[tuple[Workspace, Sms]]:
    """A gateway with Slack and SMS people (on PostgreSQL: its jobs run by a worker configured for both, which
    sweeps every second unless not `swept`: see `everywhere_queue`)."""
    slack, sms = shared_fake(request), fake_twilio(request)
    slack.reset()
    sms.reset()
    settings = {**slack_settings(slack), **twilio_settings(sms.url)}
    if kind == "postgres":
        settings["queue"] = everywhere_queue(request, swept)
    with make_stack(request, kind, tmp_path, **settings) as stack:
        if kind == "postgres":
            fresh_job_ids(stack)
        yield Workspace(stack, slack), Sms(stack, sms)


@pytest.fixture
def on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Workspace, Sms]]:
    with slack_and_sms(request, "postgres", tmp_path) as both:
        yield both


@pytest.fixture
def on_sqlite(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Workspace, Sms]]:
    with slack_and_sms(request, "sqlite", tmp_path) as both:
        yield both


def add_person(stack: Stack, name: str, principals: list[str], display: str | None = None) -> None:
    with stack.rt.transaction() as db:
        save_person(db, name, display, principals)


def add_group(stack: Stack, name: str, members: list[str]) -> None:
    with stack.rt.transaction() as db:
        save_group(db, name, members)


def card_in(slack: Workspace, channel: str) -> Message:
    return slack.fake.wait_for(lambda: next((m for m in slack.fake.messages if m.channel == channel
                                             and m.versions[0]["blocks"]), None), what=f"a card in {channel}")


def title(stack: Stack, session_id: str) -> str:
    with stack.rt.db.read() as db:
        found = title_of(db.scalar(select(first_message(session_id))))
    assert found is not None
    return found


def late_answers(stack: Stack, session_id: str) -> list[str]:
    """What the agent was told of answers that came after a request of the session had closed (rule 8)."""
    return [e["data"]["text"] for e in stack.events(session_id)
            if e["type"] == "message.received" and "already closed" in e["data"]["text"]]


def test_a_refund_proposed_to_a_support_rep_in_slack_is_approved_by_the_manager_by_sms(
        on_postgres: tuple[Workspace, Sms]) -> None:
    slack, sms = on_postgres
    # GitHub writes to nobody on their own: the manager's phone is where their requests go
    add_person(slack.stack, "manager", ["github:1002", BOBS_PHONE], display="Maria Manager")
    mention = slack.mention("alice", "Refund order 1234, it arrived broken")
    slack.reply("alice", script([("managed_refund", {"amount": 120})], final="refunded"), thread_ts=mention["ts"])
    session_id = slack.session_of(mention)
    about = title(slack.stack, session_id)
    assert about == "Refund order 1234, it arrived broken"

    [card] = slack.cards(mention)  # the support rep's thread shows it, as before
    watching = card_in(slack, SUPPORT_CHANNEL)  # and so does the support channel, and the manager's phone
    assert f"Approve managed refund? ({about})" in watching.now["text"]
    wait_for(lambda: sms.inbox(BOB), timeout=30, what="the manager's text")
    assert sms.inbox(BOB) == [f"Approve managed refund? ({about})\namount=120\n1. Approve\n2. Deny\n"
                              "Reply 1 or 2 (or approve / deny)."]

    sms.text(BOB, "1")
    wait_for(lambda: read_ledger(), timeout=30, what="the refund")
    slack.wait_idle()
    [ran] = read_ledger()
    assert (ran["tool"], ran["requester"], ran["responder"]) == ("managed_refund", SLACK_ALICE, BOBS_PHONE)
    for place in (card, watching):  # every place says the outcome
        assert "Approved by Maria Manager via SMS" in place.now["text"]
        assert not any(b["type"] == "actions" for b in place.now["blocks"])
    told = sms.inbox(BOB)[-1]  # (a confirmation's prompt is cut to 60 characters)
    assert told.startswith("Approve managed refund? (Refund order 1234")
    assert told.endswith(" Approved by Maria Manager via SMS.")

    slack.ok(slack.click("alice", watching, "Approve", version=0))  # too late: it settled once
    slack.ok(slack.click("alice", card, "Approve", version=0))
    slack.wait_idle()
    assert len(read_ledger()) == 1
    assert late_answers(slack.stack, session_id) == [
        'alice answered "Approve" to "Approve managed refund?", but that request was already closed (approved); '
        "nothing was done with this answer."] * 2
    assert slack.stack.turn(session_id, seq=2)["status"] == "completed"


def test_a_group_place_shows_each_member_and_not_the_session_that_asked(on_sqlite: tuple[Workspace, Sms]) -> None:
    slack, sms = on_sqlite
    add_person(slack.stack, "bob", [BOBS_PHONE])
    add_group(slack.stack, "finance", ["person:bob", f"slack:{TEAM}:{USERS['bob']}"])
    mention = slack.mention("alice", "Refund order 77")
    slack.reply("alice", script([("finance_refund", {"amount": 30})], final="refunded"), thread_ts=mention["ts"])

    assert slack.cards(mention) == []  # show_in_session=False
    dm = card_in(slack, f"D{USERS['bob']}")  # a DM opened with conversations.open
    assert [c.params["users"] for c in slack.fake.called("conversations.open")] == [USERS["bob"]]
    assert "Approve finance refund? (Refund order 77)" in dm.now["text"]
    assert sms.inbox(BOB) == ["Approve finance refund? (Refund order 77)\namount=30\n1. Approve\n2. Deny\n"
                              "Reply 1 or 2 (or approve / deny)."]

    slack.ok(slack.click("bob", dm, "Approve"))  # only bob's phone may: told so in the DM, and it stays open
    assert [(e.channel, e.user) for e in slack.fake.ephemerals] == [(dm.channel, USERS["bob"])]
    sms.text(BOB, "deny not this month")
    slack.wait_idle()
    assert read_ledger() == []
    assert "Denied by" in dm.now["text"] and "not this month" in dm.now["text"]
    assert sms.inbox(BOB)[-1] == "Approve finance refund? (Refund order 77) Denied by bob via SMS: not this month"
    assert slack.stack.turn(slack.session_of(mention), seq=2)["status"] == "completed"

    slack.ok(slack.click("bob", dm, "Approve", version=0))  # late: nothing runs, and the agent hears of it
    assert read_ledger() == [] and len(late_answers(slack.stack, slack.session_of(mention))) == 1


def test_api_requests_show_at_every_place_of_to_and_settle_once(on_sqlite: tuple[Workspace, Sms]) -> None:
    slack, sms = on_sqlite
    add_person(slack.stack, "bob", [BOBS_PHONE])
    agent = slack.stack.client("bot:agent")
    made = agent.post("/api/requests", json={
        "kind": "question", "prompt": "Ship order 9 today?", "options": [{"label": "Yes"}, {"label": "No"}],
        "to": [{"channel": "twilio", "address": {"to": ALICE}}, {"person": "bob"}]})
    assert made.status_code == 201, made.get_json()
    request_id = made.get_json()["requestId"]
    sms.wait()
    shown = "Ship order 9 today?\n1. Yes\n2. No\nReply 1 or 2 (the number, not the word)."
    assert sms.inbox(ALICE) == [shown] and sms.inbox(BOB) == [shown]

    sms.text(BOB, "2")
    answered = agent.get(f"/api/requests/{request_id}").get_json()
    assert (answered["outcome"], answered["response"]["optionId"]) == ("answered", "No")
    assert answered["responder"]["principalId"] == BOBS_PHONE
    told = "Ship order 9 today? Answered: No (by bob via SMS)."
    assert sms.inbox(ALICE)[-1] == told and sms.inbox(BOB)[-1] == told  # both places say the outcome

    sms.text(ALICE, "1")  # a late answer: the request stays as bob answered it
    assert agent.get(f"/api/requests/{request_id}").get_json()["response"]["optionId"] == "No"


def test_a_quorum_without_approvers_counts_people_at_places_of_other_channels(
        on_sqlite: tuple[Workspace, Sms]) -> None:
    slack, sms = on_sqlite
    add_person(slack.stack, "bob", [BOBS_PHONE])
    agent = slack.stack.client("bot:agent")
    made = agent.post("/api/requests", json={  # its session is the Slack channel's; bob's phone shows it too
        "kind": "tool-approval", "action": {"toolName": "refund", "input": {"amount": 30}}, "quorum": 2,
        "to": [{"channel": "slack", "address": {"channel": SUPPORT_CHANNEL}}, {"person": "bob"}]})
    assert made.status_code == 201, made.get_json()
    request_id = made.get_json()["requestId"]
    card = card_in(slack, SUPPORT_CHANNEL)
    sms.wait()

    sms.text(BOB, "1")  # admitted by SMS, a place of the request: counted, not yet enough
    counted = agent.get(f"/api/requests/{request_id}").get_json()
    assert counted["status"] == "pending"
    assert (counted["approvals"]["have"], counted["approvals"]["need"]) == (1, 2)

    slack.ok(slack.click("alice", card, "Approve"))  # the second person, in the Slack channel: it settles
    slack.wait_idle()
    settled = agent.get(f"/api/requests/{request_id}").get_json()
    assert (settled["status"], settled["outcome"]) == ("resolved", "approved")


def test_a_persons_phone_shows_requests_from_several_sessions_one_at_a_time(on_sqlite: tuple[Workspace, Sms]) -> None:
    slack, sms = on_sqlite
    add_person(slack.stack, "bob", [BOBS_PHONE])
    agent = slack.stack.client("bot:agent")
    first, second = (agent.post("/api/requests", json={
        "kind": "tool-approval", "action": {"toolName": tool, "input": {"amount": 5}}, "to": {"person": "bob"},
    }).get_json()["requestId"] for tool in ("refund", "payout"))
    sms.wait()
    assert sms.inbox(BOB) == ["Approve refund?\namount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."]

    sms.text(BOB, "1")
    assert agent.get(f"/api/requests/{first}").get_json()["outcome"] == "approved"
    assert sms.inbox(BOB)[1:] == ["Approve refund? Approved by bob via SMS.",
                                  "Approve payout?\namount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."]
    sms.text(BOB, "2")
    assert agent.get(f"/api/requests/{second}").get_json()["outcome"] == "denied"


@pytest.mark.parametrize(("to", "problem"), [
    ([{"channel": "twilio", "address": {"to": ALICE}}, {"person": "nobody"}], ("unknown_person", "to.1.person")),
    ({"group": "nobody"}, ("unknown_group", "to.group")),
    ([{"channel": "fax", "address": {}}], ("unknown_channel", "to.0.channel")),
    ({"person": "bob", "channel": "twilio"}, ("invalid_request", "to")),
])
def test_a_place_nobody_can_be_reached_at_is_refused_and_nothing_is_stored(
        on_sqlite: tuple[Workspace, Sms], to: Any, problem: tuple[str, str]) -> None:
    slack, sms = on_sqlite
    agent = slack.stack.client("bot:agent")
    refused = agent.post("/api/requests", json={"kind": "question", "prompt": "Ship?", "to": to})
    body = refused.get_json()
    details = body["error"]["details"]
    field = details[0]["field"] if isinstance(details, list) else details["field"]
    assert refused.status_code == 422 and (body["error"]["code"], field) == problem
    assert agent.get("/api/requests").get_json()["requests"] == []


def test_show_to_names_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="show_in_session=False needs show_to"):
        ApprovalPolicy(show_in_session=False)
    with pytest.raises(ValueError, match='a person place is {"person": "<name>"}'):
        showing({"person": " "})
    with pytest.raises(ValueError, match='a place is {"person": "<name>"}, {"group": "<name>"} or {"channel"'):
        showing([{"people": "bob"}])
    assert showing([{"group": "finance"}], show_in_session=False).in_session is False


def counted_at_every_place(slack: Workspace, quorum: int) -> tuple[str, Message]:
    """An API request that takes `quorum` people, in alice's SMS conversation (its own session) and shown at the
    support channel and on bob's phone (its other places); its id and the support channel's card."""
    add_person(slack.stack, "bob", [BOBS_PHONE], display="Bob Stone")
    made = slack.stack.client("bot:agent").post("/api/requests", json={
        "kind": "tool-approval", "action": {"toolName": "refund", "input": {"amount": 30}}, "quorum": quorum,
        "to": [{"channel": "twilio", "address": {"to": ALICE}},
               {"channel": "slack", "address": {"channel": SUPPORT_CHANNEL}}, {"person": "bob"}]})
    assert made.status_code == 201, made.get_json()
    return made.get_json()["requestId"], card_in(slack, SUPPORT_CHANNEL)


def test_a_quorum_shows_its_progress_at_every_place_that_shows_it(on_postgres: tuple[Workspace, Sms]) -> None:
    slack, sms = on_postgres
    request_id, card = counted_at_every_place(slack, 2)
    wait_for(lambda: sms.inbox(BOB) and sms.inbox(ALICE), timeout=30, what="the texts of the request")
    prompt = sms.inbox(BOB)[0].splitlines()[0]

    sms.text(BOB, "1")  # bob's phone, a place besides the request's own session: the Slack card there counts it
    count = f'1 of 2 approvals: Bob Stone for "{prompt}"; 1 more needed.'
    wait_for(lambda: "1 of 2 approvals: Bob Stone" in context_lines(card), timeout=30, what="the card's count")
    assert buttons(card) == ["Approve", "Deny"]
    wait_for(lambda: sms.inbox(BOB)[-1] == count, timeout=30, what="bob told the count where he answered")
    wait_for(lambda: sms.inbox(ALICE)[-1] == count, timeout=30, what="the request's own conversation told it")

    slack.ok(slack.click("alice", card, "Approve"))  # the second person settles it, at every place
    slack.wait_idle()
    settled = slack.stack.client("bot:agent").get(f"/api/requests/{request_id}").get_json()
    assert (settled["status"], settled["outcome"], settled["response"]["approvals"]["have"]) == \
        ("resolved", "approved", 2)
    wait_for(lambda: buttons(card) == [], timeout=30, what="the card's outcome")
    assert "Approved by Bob Stone" in card.now["text"]
    wait_for(lambda: "Approved by Bob Stone" in sms.inbox(BOB)[-1], timeout=30, what="bob told the outcome")
    assert [text for text in sms.inbox(BOB) if "approvals" in text] == [count]  # told the count once


def test_a_phone_that_shows_a_quorum_elsewhere_is_not_texted_the_count_of_another_approver(
        on_sqlite: tuple[Workspace, Sms]) -> None:
    slack, sms = on_sqlite
    request_id, card = counted_at_every_place(slack, 2)
    sms.wait()
    [shown] = sms.inbox(BOB)

    slack.ok(slack.click("alice", card, "Approve"))  # in the support channel: its card counts it
    slack.wait_idle()
    assert "1 of 2 approvals: alice" in context_lines(card)
    assert sms.inbox(BOB) == [shown]  # bob's phone shows the request, but alice did not answer there
    assert sms.inbox(ALICE)[-1].startswith("1 of 2 approvals: ")  # the request's own conversation is told

    sms.text(BOB, "approve")
    assert slack.stack.client("bot:agent").get(f"/api/requests/{request_id}").get_json()["outcome"] == "approved"
    assert buttons(card) == []
