"""Who may use the bot on Slack: people of the workspace that installed it (or of SLACK_ALLOWED_TEAMS). A Slack
Connect guest of another organization starts nothing and answers nothing; what they send is kept as ignored, and
they are told so once per channel, with an ephemeral message."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from adapters.slack import TURNED_AWAY
from engine.channels.inbound import NOTICE
from engine.store.tables import Inbound, Session, Turn
from gateway.app import create_app
from tests.conftest import make_stack
from tests.slack.test_setup import install, oauth_settings
from tests.slack.workspace import PARTNER, SECRET, USERS, Workspace, fixture, workspace
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import FakeSlack
from tests.support.signing import slack_headers

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
EDITABLE = ("adjustable_refund", {"charge_id": "ch_1", "amount": 200})
QUESTION = ("ask_question", {"question": "Which color?", "options": [{"label": "Red"}, {"label": "Blue"}]})


def refunds() -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def told_guest(slack: Workspace) -> list[tuple[str, str | None]]:
    """Where the guest was told they are turned away: (channel, thread) of each ephemeral message to them."""
    return [(e.channel, e.thread_ts) for e in slack.fake.ephemerals if e.user == USERS["guest"]
            and "another organization" in e.text]


def ignored(slack: Workspace) -> list[dict[str, Any]]:
    """The items kept as ignored (notices' own audit rows left out)."""
    with slack.stack.rt.db.read() as db:
        items = db.execute(select(Inbound.item).where(~Inbound.external_id.startswith(NOTICE))).scalars()
        return [item for item in items if item and item["type"] == "ignored"]


def turns(slack: Workspace) -> int:
    with slack.stack.rt.db.read() as db:
        return len(db.execute(select(Turn.id)).all())


def test_a_guest_mention_starts_nothing_and_they_are_told_once_per_channel(slack: Workspace) -> None:
    first = slack.mention("guest", script([REFUND]))
    slack.mention("guest", "please?")  # the same channel: nobody tells them twice
    slack.reply("guest", "hello?", first["ts"])  # a thread no session lives in: not ours, nothing stored
    assert turns(slack) == 0 and slack.fake.messages == []
    assert told_guest(slack) == [("C0TEST", first["ts"])]
    assert [item["why"] for item in ignored(slack)] == [TURNED_AWAY, TURNED_AWAY]
    with slack.stack.rt.db.read() as db:
        kept = db.execute(select(Inbound.principal).where(Inbound.item.is_not(None))).scalars().all()
    assert [principal["principalId"] for principal in kept] == [f"slack:{PARTNER}:UGUEST"] * 2
    other = slack.event("app_mention", "guest", "<@UBOT> over here", channel="C0OTHER")
    slack.ok(slack.send_event(other))
    assert told_guest(slack) == [("C0TEST", first["ts"]), ("C0OTHER", other["event"]["ts"])]


def test_a_guest_direct_message_starts_nothing(slack: Workspace) -> None:
    slack.ok(slack.send_event(slack.event("message_im", "guest", script([REFUND]), channel="D0GUEST")))
    slack.ok(slack.send_event(slack.event("message_im", "guest", "hello?", channel="D0GUEST")))
    assert turns(slack) == 0
    assert told_guest(slack) == [("D0GUEST", None)]


def test_a_guest_click_approves_nothing(slack: Workspace) -> None:
    mention = slack.mention("alice", script([REFUND]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("guest", card, "Approve"))
    slack.ok(slack.click("guest", card, "Approve"))  # a second click: still nothing, and no second notice
    assert refunds() == [] and len(slack.fake.messages) == 2  # "step 1" and the card, unchanged
    assert [r["status"] for r in slack.stack.turn(slack.session_of(mention))["requests"]] == ["pending"]
    assert told_guest(slack) == [("C0TEST", mention["ts"])]
    slack.ok(slack.click("alice", card, "Approve"))  # alice, of the installed workspace, still can
    assert len(refunds()) == 1


def test_a_guest_answers_no_question_by_menu_modal_or_reply(slack: Workspace) -> None:
    mention = slack.mention("alice", script([QUESTION]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("guest", card, "Red"))  # the select menu
    slack.ok(slack.click("guest", card, "Type an answer"))
    assert slack.fake.called("views.open") == []  # no modal for them
    slack.ok(slack.click("alice", card, "Type an answer"))
    [opened] = slack.fake.called("views.open")
    slack.ok(slack.submit_answer("guest", opened.params["view"], "red!"))  # a modal they got hold of
    slack.reply("guest", "Red", mention["ts"])  # a reply in the session's thread
    request = slack.stack.turn(slack.session_of(mention))["requests"][0]
    assert request["status"] == "pending" and request["candidates"] == []
    assert told_guest(slack) == [("C0TEST", mention["ts"])]
    assert len(ignored(slack)) == 4
    slack.ok(slack.click("alice", card, "Blue"))
    assert slack.stack.turn(slack.session_of(mention))["requests"][0]["outcome"] == "answered"


def test_a_guest_edits_no_approval(slack: Workspace) -> None:
    """The Edit button opens no modal for a guest, and an edit they submit (from a modal they got hold of) is
    neither checked nor applied: kept as ignored, the approval still pending."""
    mention = slack.mention("alice", script([EDITABLE]))
    [card] = slack.cards(mention)
    slack.ok(slack.click("guest", card, "Edit"))
    assert slack.fake.called("views.open") == []
    slack.ok(slack.click("alice", card, "Edit"))
    [opened] = slack.fake.called("views.open")
    submitted = slack.submit_edit("guest", opened.params["view"], {"amount": "20"})
    assert submitted.status_code == 200 and not submitted.get_data()  # a plain ack: the modal closes
    slack.ok(slack.submit_edit("guest", opened.params["view"], {"tags": "[vip"}))  # unfit: still no errors shown
    request = slack.stack.turn(slack.session_of(mention))["requests"][0]
    assert request["status"] == "pending" and request["candidates"] == [] and read_ledger() == []
    assert told_guest(slack) == [("C0TEST", mention["ts"])] and len(ignored(slack)) == 3
    slack.ok(slack.submit_edit("alice", opened.params["view"], {"amount": "20"}))
    assert [e["amount"] for e in read_ledger()] == [20]


def test_external_users_are_heard_when_allowed(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    with workspace(request, "sqlite", tmp_path, slack_allow_external_users=True) as slack:
        mention = slack.mention("guest", script([REFUND]))
        [card] = slack.cards(mention)
        slack.ok(slack.click("guest", card, "Approve"))
        assert [r["responder"] for r in refunds()] == [f"slack:{PARTNER}:UGUEST"]
        assert told_guest(slack) == [] and ignored(slack) == []


def test_slack_allowed_teams_names_who_is_heard(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Listed, the partner's team is heard; the installed workspace, not listed, is not."""
    with workspace(request, "sqlite", tmp_path, slack_allowed_teams=[PARTNER]) as slack:
        slack.mention("guest", script([REFUND]))
        slack.mention("alice", script([REFUND]))
        with slack.stack.rt.db.read() as db:
            [owner] = db.execute(select(Session.initiator)).scalars().all()
        assert owner["principalId"] == f"slack:{PARTNER}:UGUEST"
        assert [e.user for e in slack.fake.ephemerals] == [USERS["alice"]]


def test_a_member_of_the_installed_grid_organization_is_heard(request: pytest.FixtureRequest,
                                                              tmp_path: Path) -> None:
    """In a Grid organization Slack may name a person's team by the organization's id (`user_team: E...`):
    SLACK_ALLOWED_TEAMS=E0GRID hears them, and still not a guest."""
    with workspace(request, "sqlite", tmp_path, slack_allowed_teams=["E0GRID"]) as slack:
        member = slack.event("app_mention", "alice", f"<@UBOT> {script([REFUND])}", user_team="E0GRID")
        slack.ok(slack.send_event(member))
        slack.mention("guest", script([REFUND]))
        assert turns(slack) == 1 and [e.user for e in slack.fake.ephemerals] == [USERS["guest"]]


def test_a_guest_is_not_taken_for_a_member_of_the_organization_whose_channel_it_is(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """In a Slack Connect channel of our Grid organization E0OURS, a mention's top level names our workspace and
    organization; the guest's own team is `user_team`, and their organization is not ours."""
    with workspace(request, "sqlite", tmp_path, slack_allowed_teams=["E0OURS"]) as slack:
        for who in ("guest", "alice"):
            payload = slack.event("app_mention", who, f"<@UBOT> {script([REFUND])}")
            payload.update(enterprise_id="E0OURS", is_ext_shared_channel=True,
                           authorizations=[{**payload["authorizations"][0], "enterprise_id": "E0OURS"}])
            slack.ok(slack.send_event(payload))
        assert turns(slack) == 1 and [e.user for e in slack.fake.ephemerals] == [USERS["guest"]]


def test_oauth_installations_are_the_allowed_teams(request: pytest.FixtureRequest, tmp_path: Path,
                                                   fake: FakeSlack) -> None:
    with make_stack(request, "sqlite", tmp_path, **oauth_settings(fake)) as stack:
        slack = Workspace(stack, fake)
        installation = install(slack)
        team, bot = installation["team"]["id"], installation["bot_user_id"]

        def mention(who: str, user_team: str) -> None:
            payload = slack.event("app_mention", "alice", f"<@{bot}> {script([REFUND])}", user_team=user_team)
            payload["event"]["user"] = USERS[who]
            payload.update(team_id=team, authorizations=[{**payload["authorizations"][0], "team_id": team}])
            slack.ok(slack.send_event(payload))

        mention("alice", team)
        mention("guest", PARTNER)
        assert turns(slack) == 1 and [e.user for e in slack.fake.ephemerals] == [USERS["guest"]]
        install(slack, {**fixture("oauth_v2_access"), "access_token": "xoxb-partner",
                        "team": {"id": PARTNER, "name": "Partner"}})  # the partner installs the app too
        mention("guest", PARTNER)
        assert turns(slack) == 2


def test_two_web_processes_tell_a_guest_once(slack_on_postgres: Workspace) -> None:
    """What was said is remembered in the database: another web process (any gunicorn worker) knows it."""
    slack = slack_on_postgres
    other = create_app(slack.stack.settings)
    try:
        first = slack.event("app_mention", "guest", "<@UBOT> hi")
        second = slack.event("app_mention", "guest", "<@UBOT> hi again")
        slack.ok(slack.send_event(first))
        assert other.test_client().post("/slack/events", **signed(second)).status_code == 200
        slack.wait_idle()
        assert told_guest(slack) == [("C0TEST", first["event"]["ts"])]
        assert len(ignored(slack)) == 2 and turns(slack) == 0
    finally:
        other.extensions["hitl"].db.dispose()


def signed(payload: dict[str, Any]) -> dict[str, Any]:
    body = json.dumps(payload)
    return {"data": body, "headers": slack_headers(SECRET, body)}
