"""The GitHub REST client: what it sends, and how GitHub's refusals reach the job that called."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import pytest
import requests
import responses

from adapters.github import CollaboratorRole, GithubApiError, GithubClient
from engine.channels.contract import ChannelUnavailable

API = "https://ghe.example.test/api/v3"
REPO = "Codertocat/Hello-World"
REACTIONS = f"{API}/repos/{REPO}/issues/comments/7/reactions"
PERMISSION = f"{API}/repos/{REPO}/collaborators/carol/permission"


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock() as rsps:
        yield rsps


def test_comments_go_to_the_configured_api_with_the_token(mock: responses.RequestsMock) -> None:
    created = mock.post(f"{API}/repos/{REPO}/issues/3/comments", json={"id": 99}, status=201)
    edited = mock.patch(f"{API}/repos/{REPO}/issues/comments/99", json={"id": 99})
    client = GithubClient("ghp_secret", API + "/")
    assert client.create_comment(REPO, 3, "hello") == 99
    client.update_comment(REPO, 99, "bye")
    sent = created.calls[0].request
    assert json.loads(sent.body) == {"body": "hello"}
    assert (sent.headers["Authorization"], sent.headers["Accept"], sent.headers["X-GitHub-Api-Version"]) == (
        "Bearer ghp_secret", "application/vnd.github+json", "2022-11-28")
    assert json.loads(edited.calls[0].request.body) == {"body": "bye"}


def test_a_reaction_is_created_once_and_then_already_there(mock: responses.RequestsMock) -> None:
    mock.post(REACTIONS, json={"content": "eyes"}, status=201)
    mock.post(REACTIONS, json={"content": "eyes"}, status=200)
    client = GithubClient("t", API)
    assert client.add_reaction(REPO, 7, "eyes") is True
    assert client.add_reaction(REPO, 7, "eyes") is False


@pytest.mark.parametrize("status, headers, body, retry_after", [
    (403, {"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "in 120 s"},
     {"message": "API rate limit exceeded"}, 120),
    (403, {"Retry-After": "30"}, {"message": "You have exceeded a secondary rate limit"}, 30),
    (429, {"Retry-After": "7"}, {"message": "Too Many Requests"}, 7),
    (502, {}, {"message": "Server Error"}, None),
], ids=["primary limit", "secondary limit", "429", "5xx"])
def test_rate_limits_and_outages_make_the_job_retry(mock: responses.RequestsMock, status: int,
                                                    headers: dict[str, str], body: dict, retry_after: float | None,
                                                    ) -> None:
    if "X-RateLimit-Reset" in headers:  # GitHub gives the epoch second the limit resets at
        headers = {**headers, "X-RateLimit-Reset": str(int(time.time()) + 120)}
    mock.post(REACTIONS, json=body, status=status, headers=headers)
    with pytest.raises(ChannelUnavailable) as raised:
        GithubClient("t", API).add_reaction(REPO, 7, "+1")
    if retry_after is None:
        assert raised.value.retry_after is None
    else:
        assert raised.value.retry_after == pytest.approx(retry_after, abs=2)


def test_a_network_failure_makes_the_job_retry(mock: responses.RequestsMock) -> None:
    mock.post(REACTIONS, body=requests.ConnectionError("connection refused"))
    with pytest.raises(ChannelUnavailable, match="connection refused"):
        GithubClient("t", API).add_reaction(REPO, 7, "+1")


def test_any_other_refusal_is_an_api_error(mock: responses.RequestsMock) -> None:
    mock.post(f"{API}/repos/{REPO}/issues/3/comments", json={"message": "Resource not accessible by integration"},
              status=403)
    with pytest.raises(GithubApiError, match="Resource not accessible") as raised:
        GithubClient("t", API).create_comment(REPO, 3, "hello")
    assert raised.value.status == 403


def test_a_collaborators_role_is_asked_once_per_minute(mock: responses.RequestsMock) -> None:
    lookup = mock.get(PERMISSION, json={"permission": "write", "role_name": "maintain"})
    now = [1000.0]
    client = GithubClient("t", API, clock=lambda: now[0])
    assert client.role(REPO, "carol") == CollaboratorRole("maintain", "write")  # role_name, finer than `permission`
    assert lookup.calls[0].request.req_kwargs["timeout"] == 3.0  # asked on the webhook's path: briefly
    now[0] += 59
    assert client.role("codertocat/hello-world", "Carol").name == "maintain"
    assert lookup.call_count == 1
    now[0] += 2
    assert client.role(REPO, "carol").name == "maintain"
    assert lookup.call_count == 2


def test_someone_github_does_not_know_here_has_no_role(mock: responses.RequestsMock) -> None:
    mock.get(PERMISSION, json={"message": "Not Found"}, status=404)
    assert GithubClient("t", API).role(REPO, "carol") == CollaboratorRole("none", "none")
