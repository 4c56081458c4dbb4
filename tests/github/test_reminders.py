"""A reminder on GitHub: a comment that mentions who asked and says how to answer the prompt above."""

from __future__ import annotations

from adapters.github.render import render_reminder_comment
from engine.protocol import Principal
from tests.github.test_channel import request_with

OCTOCAT = Principal(authenticator="github", issuer="github", principal_type="user", principal_id="github:1001",
                    attributes={"login": "octocat"})


def test_a_reminder_mentions_the_requester_and_nobody_the_prompt_names() -> None:
    asked = request_with("Ping @hubot about it?", {"team": "x"}).model_copy(update={"requested_by": OCTOCAT})
    assert render_reminder_comment(asked) == \
        "@octocat Reminder: Ping @\u200bhubot about it? Reply `/approve` or `/deny <note>`."
    anonymous = request_with("Deploy?", {})
    assert render_reminder_comment(anonymous) == "Reminder: Deploy? Reply `/approve` or `/deny <note>`."
