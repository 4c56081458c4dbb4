"""A GitHub team whose members approve together: two of them settle a release, each `/approve` short of the
quorum is answered with the count, and a team GitHub will not show refuses (fail closed). GitHub is mocked
in-process (`responses`): the team members API and the comments the bot writes. An issue that shows the request
besides its own is told the count of a GitHub approver only."""

from __future__ import annotations

from typing import Any

import pytest
import responses

from adapters.github import GithubApiError, GithubClient
from engine.policies import SessionInfo
from engine.protocol import Approvals, Approver, Principal
from gateway.github import github_channel
from gateway.settings import Settings
from tests.github.support import ALICE, BOB, BOT, CAROL, DAVE, Github
from tests.github.test_channel import request_with
from tests.support.agent import read_ledger, script

API = "https://ghe.example.test/api/v3"
RELEASE = ("github_release", {"version": "5.0"})


def ran(tool: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool]


def test_two_of_a_team_approve_and_the_first_is_answered_with_the_count(github: Github) -> None:
    github.fake.teams["acme/release"] = [(p.login, p.id) for p in (ALICE, BOB, CAROL)]
    github.comment(ALICE, f"@{BOT} {script([RELEASE], final='released')}")
    [(_, prompt)] = github.prompts()

    first = github.comment(ALICE, "/approve")
    again = github.comment(ALICE, "/approve")

    assert ran("github_release") == []
    counts = [c.body for c in github.fake.by_bot("codertocat/hello-world", 1) if "approvals" in c.body]
    assert counts == ['1 of 2 approvals: alice for "Approve github release?"; 1 more needed.'] * 2
    assert first.comment.reactions == again.comment.reactions == ["eyes"]

    github.comment(BOB, "/approve")

    assert [(e["version"], e["responder"]) for e in ran("github_release")] == [("5.0", "github:1002")]
    assert "**Approved by alice, bob.**" in prompt.body


def test_someone_outside_the_team_is_refused(github: Github) -> None:
    github.fake.teams["acme/release"] = [(p.login, p.id) for p in (ALICE, BOB, CAROL)]
    github.comment(ALICE, f"@{BOT} {script([RELEASE])}")

    refused = github.comment(DAVE, "/approve")

    assert refused.comment.reactions == ["eyes", "-1"]
    assert "only github-team:acme/release may answer this request" in github.said()[-1]
    assert ran("github_release") == []


def test_a_team_github_will_not_show_refuses(github: Github) -> None:
    github.comment(ALICE, f"@{BOT} {script([RELEASE])}")

    github.comment(ALICE, "/approve")

    told = github.said()[-1]
    assert "the members of github-team:acme/release could not be looked up" in told and "404" in told
    assert ran("github_release") == []
    assert [r["status"] for r in github.stack.pending(github.session())] == ["pending"]


def test_a_teams_members_are_read_a_page_at_a_time() -> None:
    with responses.RequestsMock() as mock:
        url = f"{API}/orgs/acme/teams/release/members"
        first = mock.get(url, json=[{"id": n, "login": f"u{n}"} for n in range(100)],
                         match=[responses.matchers.query_param_matcher({"per_page": "100", "page": "1"})])
        mock.get(url, json=[{"id": 100, "login": "u100"}],
                 match=[responses.matchers.query_param_matcher({"per_page": "100", "page": "2"})])
        client = GithubClient("t", API)

        assert client.team_members("acme", "release") == list(range(101))
        assert first.calls[0].request.headers["Authorization"] == "Bearer t"


def test_a_team_github_does_not_know_is_an_api_error() -> None:
    with responses.RequestsMock() as mock:
        mock.get(f"{API}/orgs/acme/teams/gone/members", json={"message": "Not Found"}, status=404)
        with pytest.raises(GithubApiError) as raised:
            GithubClient("t", API).team_members("acme", "gone")
    assert raised.value.status == 404


class Comments:
    """Stands in for the GitHub client: the comments the channel writes."""

    def __init__(self) -> None:
        self.made: list[tuple[str, int, str]] = []

    def create_comment(self, repository: str, issue: int, body: str) -> int:
        self.made.append((repository, issue, body))
        return len(self.made)


def test_an_issue_showing_a_request_besides_its_own_is_told_the_count_of_a_github_approver_only() -> None:
    channel = github_channel(Settings(github_webhook_secret="s", github_token="t", github_bot_login="@bot"))
    assert channel is not None
    comments = channel.client = Comments()  # type: ignore[assignment]
    session = SessionInfo("ses_2", "default", "github", "github:acme/ops:4", None)
    by_sms = Principal(authenticator="twilio", issuer="twilio", principal_type="user", principal_id="twilio:+1555")
    by_github = Principal(authenticator="github", issuer="github", principal_type="user", principal_id="github:1002")
    request = request_with("Approve release?", {"version": "5.0"}).model_copy(update={"approvals": Approvals(
        have=1, need=2, by=[Approver(name="bob", principal=by_github)])})

    assert channel.progress(session, request, "ref", elsewhere=by_sms) is None  # told by SMS, where they answered
    channel.progress(session, request, "ref", elsewhere=by_github)
    channel.progress(session, request, "ref")  # (the request's own issue: whoever approved)

    assert comments.made == [("acme/ops", 4, '1 of 2 approvals: bob for "Approve release?"; 1 more needed.')] * 2
