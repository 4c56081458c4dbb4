"""GITHUB_MIN_PERMISSION: on a public repository anyone can comment, and only collaborators with enough access
may use the bot. Below it a comment starts nothing, answers nothing and steers nothing: it is stored as ignored,
gets 👎, and its writer is told why once per issue. GitHub failing to say fails closed."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select

from engine.jobs.recovery import sweep
from engine.store.tables import Session
from tests.github.conftest import github_in_process
from tests.github.support import ALICE, BOT, CAROL, DAVE, Github, Person
from tests.github.test_webhook import QUESTION, REFUND, pending, refunds, start
from tests.support.agent import script

ERIN, FRANK = Person("erin", 1005), Person("frank", 1006)
TOLD = ("@carol thanks for your comment; it was not passed on: only collaborators with write access (or more) "
        "to this repository may use this bot.")


@pytest.fixture
def anyone(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Github]:
    """GITHUB_MIN_PERMISSION=none (or any): anyone who can comment may use the bot, as before the setting."""
    with github_in_process(tmp_path, github_min_permission=getattr(request, "param", "none")) as built:
        yield built


def sessions(github: Github) -> int:
    with github.stack.rt.db.read() as db:
        return int(db.execute(select(func.count()).select_from(Session)).scalar_one())


def test_an_outsiders_mention_starts_nothing_and_they_are_told_once_per_issue(github: Github) -> None:
    github.fake.roles.update(carol="read", dave="none")
    first = github.comment(CAROL, f"@{BOT} {script([REFUND])}")
    assert (first.response.status_code, first.outcome) == (200, "ignored")
    assert sessions(github) == 0 and refunds() == []
    assert first.comment.reactions == ["-1"] and github.said() == [TOLD]
    again = github.comment(CAROL, f"@{BOT} please, {script([REFUND])}")
    assert again.outcome == "ignored" and again.comment.reactions == ["-1"]
    assert github.said() == [TOLD]  # told once on this issue
    github.comment(CAROL, f"@{BOT} hello", issue=2)
    github.comment(DAVE, f"@{BOT} hello")
    assert github.said(issue=2) == [TOLD] and github.said()[-1] == TOLD.replace("@carol", "@dave")
    assert sessions(github) == 0
    [stored, *_] = github.inbound()
    assert stored.processed_at is not None and (stored.item or {})["type"] == "ignored"
    assert (stored.item or {})["why"] == "permission"
    assert (stored.principal or {})["attributes"]["permission"] == "read"


def test_an_outsider_whose_notice_could_not_be_posted_is_told_at_their_next_comment(github: Github) -> None:
    github.fake.roles["carol"] = "read"
    github.fake.gone.add(1)  # GitHub refuses the reply
    github.comment(CAROL, f"@{BOT} {script([REFUND])}")
    assert github.said() == []
    github.fake.gone.clear()
    github.comment(CAROL, f"@{BOT} {script([REFUND])}")
    assert github.said() == [TOLD] and sessions(github) == 0


def test_an_outsiders_approve_or_message_on_a_maintainers_prompt_changes_nothing(github: Github) -> None:
    github.fake.roles["carol"] = "read"
    sid = start(github, REFUND)  # alice may write (the fake's default role)
    approve = github.comment(CAROL, "/approve")
    steer = github.comment(CAROL, f"@{BOT} never mind, stop")
    answer = github.comment(CAROL, f"@{BOT} approve")
    assert [s.outcome for s in (approve, steer, answer)] == ["ignored"] * 3
    assert len(pending(github, sid)) == 1
    turn = github.stack.turn(sid)
    assert turn["status"] == "waiting" and [r["candidates"] for r in turn["requests"]] == [[]]
    assert [m["role"] for m in turn["messages"]].count("user") == 1 and refunds() == []
    assert approve.comment.reactions == ["-1"]
    [(_, prompt)] = github.prompts()
    assert "Reply `/approve`" in prompt.body
    assert github.comment(ALICE, "/approve").comment.reactions == ["eyes", "+1"]
    assert len(refunds()) == 1 and github.stack.turn(sid)["status"] == "completed"


def test_a_writer_and_better_may_use_it_and_a_custom_role_ranks_as_its_base(github: Github) -> None:
    github.fake.roles.update(carol="maintain", erin="release-manager", frank="community")
    github.fake.custom_roles.update({"release-manager": "write", "community": "read"})
    sid = start(github, QUESTION, who=ERIN)
    assert github.comment(FRANK, "/answer 1").outcome == "ignored"
    assert len(pending(github, sid)) == 1
    github.comment(ERIN, "/answer 2")
    [(request, _)] = github.prompts()
    assert request.outcome == "answered" and request.responder is not None
    assert request.responder.attributes["permission"] == "release-manager"
    assert start(github, REFUND, issue=2, who=CAROL) != ""


def test_a_higher_floor_turns_writers_away(tmp_path: Path) -> None:
    with github_in_process(tmp_path, github_min_permission="maintain") as github:
        github.fake.roles.update(carol="write", dave="admin")
        assert github.comment(CAROL, f"@{BOT} {script([REFUND])}").outcome == "ignored"
        assert github.said() == [TOLD.replace("write access", "maintain access")]
        start(github, REFUND, who=DAVE)
        github.comment(DAVE, "/approve")
        assert len(refunds()) == 1


@pytest.mark.parametrize("anyone", ["none", "any"], indirect=True)
def test_the_floor_none_lets_anyone_who_can_comment_in(anyone: Github) -> None:
    anyone.fake.roles["carol"] = "none"
    sid = start(anyone, REFUND, who=CAROL)
    approval = anyone.comment(CAROL, "/approve")
    assert approval.comment.reactions == ["eyes", "+1"] and len(refunds()) == 1
    assert anyone.stack.turn(sid)["status"] == "completed"
    assert not any("not passed on" in said for said in anyone.said())


def test_when_github_cannot_say_the_comment_is_ignored_and_not_retried(github: Github,
                                                                      caplog: pytest.LogCaptureFixture) -> None:
    github.fake.down = True
    with caplog.at_level(logging.WARNING):
        failed = github.comment(ALICE, f"@{BOT} {script([REFUND])}")
    assert (failed.response.status_code, failed.outcome) == (200, "ignored")
    assert any("alice" in r.getMessage() and "fails closed" in r.getMessage() for r in caplog.records)
    [stored] = github.inbound()
    assert (stored.item or {})["why"] == "permission-unknown"
    assert (stored.principal or {})["attributes"]["permission"] is None
    github.fake.down = False
    sweep(github.stack.rt)
    github.wait_idle()
    assert sessions(github) == 0 and github.said() == []  # not retried: a later surprise would be worse
    start(github, REFUND)  # a failed lookup is not remembered: commenting again works
    github.comment(ALICE, "/approve")
    assert len(refunds()) == 1


def test_a_session_the_api_started_is_not_gated_but_outsiders_comments_on_it_are(github: Github) -> None:
    github.fake.roles["carol"] = "read"
    created = github.stack.client("alice").post("/api/sessions", json={
        "message": script([REFUND]), "channel": "github", "address": {"repo": "Codertocat/Hello-World", "issue": 12}})
    assert created.status_code == 201
    github.wait_idle()
    [(request, _)] = github.prompts(issue=12)
    assert github.comment(CAROL, "/approve", issue=12).outcome == "ignored"
    assert github.stack.client("alice").post(f"/api/sessions/{created.get_json()['id']}/input", json={
        "inputResponses": [{"requestId": request.request_id, "optionId": "approve"}]}).status_code < 300
    github.wait_idle()
    assert len(refunds()) == 1
