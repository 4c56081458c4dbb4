"""The GitHub channel's configuration, addresses and comments."""

from __future__ import annotations

import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from adapters.github import GithubChannel, render_prompt, render_settled_prompt
from engine.answers.options import APPROVE, DENY
from engine.channels.contract import QueuePosition
from engine.jobs.recovery import sweep
from engine.protocol import InputRequestOut, api_key_principal
from gateway.app import create_app
from gateway.compose import ConfigurationError
from gateway.github import github_channel
from gateway.settings import Settings
from tests.conftest import sqlite_settings
from tests.github.support import REPO, Github
from tests.support.agent import script


@pytest.mark.parametrize("given, message", [
    ({"github_webhook_secret": "s"}, "GitHub is half configured: GITHUB_WEBHOOK_SECRET is set but GITHUB_TOKEN and "
                                     "GITHUB_BOT_LOGIN are missing"),
    ({"github_token": "t", "github_bot_login": "bot"}, "GitHub is half configured: GITHUB_TOKEN and GITHUB_BOT_LOGIN "
                                                      "are set but GITHUB_WEBHOOK_SECRET is missing"),
    ({"github_webhook_secret": "s", "github_token": "t"}, "GitHub is half configured: GITHUB_WEBHOOK_SECRET and "
                                                         "GITHUB_TOKEN are set but GITHUB_BOT_LOGIN is missing"),
])
def test_a_half_configured_channel_fails_at_start_naming_what_is_missing(tmp_path: Path, given: dict[str, str],
                                                                         message: str) -> None:
    """The wording every channel uses: what is set, and each variable missing."""
    with pytest.raises(ConfigurationError) as failed:
        create_app(sqlite_settings(tmp_path, **given))
    assert str(failed.value) == message


def test_the_channel_is_off_without_github_settings_and_the_webhook_is_not_there(tmp_path: Path) -> None:
    assert github_channel(Settings()) is None
    app = create_app(sqlite_settings(tmp_path))
    assert "github" not in app.extensions["hitl"].channels
    assert app.test_client().post("/github/webhook", data=b"{}").status_code == 404


def test_the_api_url_must_be_a_url() -> None:
    settings = Settings(github_webhook_secret="s", github_token="t", github_bot_login="bot",
                        github_api_url="api.github.com")
    with pytest.raises(ConfigurationError, match="GITHUB_API_URL"):
        github_channel(settings)


def test_an_address_is_a_repository_and_an_issue_number() -> None:
    channel = github_channel(Settings(github_webhook_secret="s", github_token="t", github_bot_login="@bot"))
    assert isinstance(channel, GithubChannel) and channel.bot_login == "bot"
    assert channel.address({"repo": "Codertocat/Hello-World", "issue": 9}) == "github:codertocat/hello-world:9"
    for wrong in ({"repo": "Codertocat", "issue": 9}, {"repo": "a/b/c", "issue": 9}, {"repo": REPO, "issue": 0},
                  {"repo": REPO, "issue": "9"}, {"repo": REPO, "issue": True}, {"issue": 9}):
        with pytest.raises(ValueError):
            channel.address(wrong)


def test_a_session_opened_through_the_api_posts_its_requests_on_that_issue(github: Github) -> None:
    client = github.stack.client("alice")
    created = client.post("/api/sessions", json={
        "message": script([("refund", {"charge_id": "ch_1", "amount": 5})]),
        "channel": "github", "address": {"repo": REPO, "issue": 9}})
    assert created.status_code == 201
    github.wait_idle()
    [(request, prompt)] = github.prompts(issue=9)
    assert request.session_id == created.get_json()["id"] and prompt.body.startswith("Approve refund?")
    bad = client.post("/api/sessions", json={"message": "hi", "channel": "github", "address": {"repo": REPO}})
    assert (bad.status_code, bad.get_json()["error"]["code"]) == (422, "invalid_address")


def test_a_comment_github_refuses_for_good_is_logged_once_and_the_session_goes_on(
        github: Github, caplog: pytest.LogCaptureFixture) -> None:
    github.fake.gone.add(9)  # the issue was deleted, or the token lost access to it
    client = github.stack.client("alice")
    with caplog.at_level(logging.ERROR):
        created = client.post("/api/sessions", json={
            "message": script([("refund", {"charge_id": "ch_1", "amount": 5})]),
            "channel": "github", "address": {"repo": REPO, "issue": 9}})
        github.wait_idle()
    session_id = created.get_json()["id"]
    [request] = github.stack.pending(session_id)
    comment_posts = [c for c in github.fake.calls if c == ("POST", f"/repos/{REPO.lower()}/issues/9/comments")]
    assert len(comment_posts) == 2 and github.said(issue=9) == []  # "step 1" and the prompt, each tried once
    [error] = [r.getMessage() for r in caplog.records if request["requestId"] in r.getMessage()]
    assert session_id in error and "github" in error and "404" in error
    assert sweep(github.stack.rt).redelivered == 0  # nothing left to retry
    github.wait_idle()
    assert len([c for c in github.fake.calls if c[0] == "POST"]) == 2
    github.fake.gone.clear()  # access is back
    answered = client.patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})
    assert answered.status_code == 200, answered.get_json()
    github.wait_idle()
    settled, answer = github.said(issue=9)
    assert "Approved by alice" in settled and answer.startswith("done")
    assert github.stack.turn(session_id)["status"] == "completed"


def request_with(prompt: str, tool_input: dict) -> InputRequestOut:
    return InputRequestOut.model_validate({
        "requestId": "req_1", "sessionId": "ses_1", "turnId": "turn_1", "kind": "tool-approval", "prompt": prompt,
        "action": {"kind": "tool-call", "callId": "call_1", "toolName": "notify", "input": tool_input},
        "options": [APPROVE, DENY],  # the engine's own
        "allowFreeform": False, "display": "confirmation", "requestedBy": None,
        "createdAt": datetime.now(UTC), "expiresAt": None, "status": "pending", "outcome": None})


def test_text_we_did_not_write_notifies_nobody() -> None:
    request = request_with("Ping @octocat about it?", {"team": "@github/security"})
    body = render_prompt(request, QueuePosition(2, 3))
    assert body == ("(2 of 3) Ping @\u200boctocat about it?\nteam=@\u200bgithub/security\n1. Approve\n2. Deny\n"
                    "Reply `/approve` or `/deny <note>`.")


def test_a_settled_prompt_loses_how_to_answer_and_names_who_answered() -> None:
    settled = request_with("Approve notify?", {"team": "ops"}).model_copy(update={
        "status": "resolved", "outcome": "denied", "response": {"optionId": "cancel", "text": "not now"},
        "responder": api_key_principal("bob")})
    body = render_settled_prompt(settled)
    assert body.endswith("\n**Denied by bob: not now**") and "Reply" not in body
