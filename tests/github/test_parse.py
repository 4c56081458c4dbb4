"""What a GitHub delivery asks of us, read from GitHub's own payload examples (extra fields and all)."""

from __future__ import annotations

import json

import pytest

from adapters.github import CommentReply, GithubParseError, PingEvent, parse_github_event, read_delivery
from tests.github.support import ALICE, BOT, BOT_USER, HOOK_ID, REPO, Person, comment_event, fixture


def read(body: str, who: Person = ALICE, bot_login: str = BOT, **event: object) -> CommentReply | None:
    parsed = parse_github_event("issue_comment", json.dumps(comment_event(body, who, 42, **event)).encode(),
                                bot_login)
    assert not isinstance(parsed, PingEvent)
    return parsed


def asks(body: str, **event: object) -> tuple[str, str | None] | None:
    reply = read(body, **event)
    return (reply.kind, reply.text) if reply else None


def test_githubs_examples_read_as_they_are() -> None:
    for name in ("issue_comment_created", "issue_comment_created.with-installation"):
        assert parse_github_event("issue_comment", json.dumps(fixture(name)).encode(), BOT) is None  # chatter
        reply = read("/approve", template=name)
        assert reply == CommentReply("approve", None, 42, ALICE.id, "alice", REPO, "Codertocat", 1)
    ping = parse_github_event("ping", json.dumps(fixture("ping")).encode(), BOT)
    assert isinstance(ping, PingEvent) and ping.hook_id == HOOK_ID


@pytest.mark.parametrize("action", ["edited", "deleted"])
def test_only_created_comments_ask_anything(action: str) -> None:
    assert read("/approve", action=action, template=f"issue_comment_{action}") is None


def test_other_events_ask_nothing() -> None:
    body = json.dumps(comment_event("/approve", ALICE, 42)).encode()
    assert parse_github_event("pull_request_review_comment", body, BOT) is None


@pytest.mark.parametrize("body, expected", [
    ("/approve", ("approve", None)),
    ("/APPROVE  \n", ("approve", None)),
    ("/deny too expensive", ("deny", "too expensive")),
    ("/deny", ("deny", None)),
    ("/answer 2", ("answer", "2")),
    ("/answer Blue", ("answer", "Blue")),
    ("/answer something\nteal", ("answer", "something\nteal")),
    ("/answer", None),
    ("@hitl-bot something teal", ("message", "something teal")),
    ("@HITL-BOT: /approve", ("approve", None)),
    ("Hey @hitl-bot, deploy it", ("message", "Hey @hitl-bot, deploy it")),
    ("@hitl-bot", None),
    ("> /approve\nI am not sure yet", None),
    ("> Approve refund?\n> 1. Approve\n\n/deny not now", ("deny", "not now")),
    ("> @hitl-bot what was that?\nthanks", None),
    ("LGTM\n/approve", None),
    ("please /approve", None),
    ("/approved", None),
    ("/approve-all", None),
    ("@hitl-bots hello", None),
    ("mail x@hitl-bot.example", None),
    ("You are totally right! I'll get this fixed right away.", None),
], ids=repr)
def test_what_a_comment_asks(body: str, expected: tuple[str, str | None] | None) -> None:
    assert asks(body) == expected


def test_bots_our_own_user_and_our_own_app_never_ask_anything() -> None:
    assert asks("/approve", who=Person("dependabot[bot]", 49699333, "Bot")) is None
    assert asks("/approve", who=BOT_USER) is None
    assert asks("@hitl-bot /approve", who=Person("HITL-Bot", BOT_USER.id)) is None
    assert asks("/approve", app="hitl-bot") is None  # written through our App on a person's behalf
    assert asks("/approve", app="some-other-app") == ("approve", None)  # a person using another tool


def test_an_apps_bot_login_is_mentioned_without_its_suffix() -> None:
    assert asks("@hitl-bot /answer 2", bot_login="hitl-bot[bot]") == ("answer", "2")
    assert asks("/approve", who=Person("hitl-bot[bot]", 9002, "Bot"), bot_login="hitl-bot[bot]") is None


def test_what_we_cannot_read_is_a_parse_error() -> None:
    with pytest.raises(GithubParseError):
        parse_github_event("issue_comment", b"{not json", BOT)
    broken = comment_event("/approve", ALICE, 42)
    del broken["comment"]["user"]
    with pytest.raises(GithubParseError):
        parse_github_event("issue_comment", json.dumps(broken).encode(), BOT)
    with pytest.raises(GithubParseError, match="X-GitHub-Delivery"):
        read_delivery({"x-github-event": "ping", "x-github-hook-id": "1"})
    assert read_delivery({"x-github-event": "ping", "x-github-delivery": "abc", "x-github-hook-id": "7"}).key == \
        "delivery:7:abc"
