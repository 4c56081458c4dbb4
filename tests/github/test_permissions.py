"""A response policy of one's own reads the collaborator role GitHub's permission API gave: "write or better",
examples/github_release's.

The agent here is not the test agent: a release agent whose `publish` tool anyone with write access may approve,
the way a CI job asks maintainers on a pull request. GITHUB_MIN_PERMISSION is `triage` here, so a triager's
`/approve` reaches the response policy (with the default, `write`, the channel ignores it first: test_access.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine import Agent, ApprovalPolicy, ScriptedModel, ToolContext, always, tool
from examples.github_release import write_access_or_better
from tests.github.conftest import github_in_process
from tests.github.support import CAROL, DAVE, REPO, Github
from tests.support.agent import play, read_ledger, record, script


@tool(approval=ApprovalPolicy(request=always(), response=write_access_or_better))
def publish(ctx: ToolContext, version: str) -> dict[str, Any]:
    """Publish a release."""
    record("publish", ctx, version=version)
    return {"published": version}


agent = Agent(name="release-agent", instructions="You publish releases.", model=ScriptedModel(play),
              tools=[publish])


@pytest.fixture
def releases(tmp_path: Path) -> Iterator[Github]:
    with github_in_process(tmp_path, agent=f"{__name__}:agent", github_min_permission="triage") as built:
        yield built


def test_write_access_or_better_may_approve_a_release(releases: Github) -> None:
    releases.fake.roles.update(carol="triage", dave="write")
    created = releases.stack.client("alice").post("/api/sessions", json={  # a CI job asks on its pull request
        "message": script([("publish", {"version": "1.2.0"})]), "channel": "github",
        "address": {"repo": REPO, "issue": 12}})
    assert created.status_code == 201
    releases.wait_idle()

    refused = releases.comment(CAROL, "/approve", issue=12)
    assert refused.comment.reactions == ["eyes", "-1"]
    assert releases.said(issue=12)[-1] == ("@carol your answer to “Approve publish?” was not accepted: "
                                           "releasing needs write access to the repository")
    approved = releases.comment(DAVE, "/approve", issue=12)
    assert approved.comment.reactions == ["eyes", "+1"]
    assert [(e["version"], e["responder"]) for e in read_ledger()] == [("1.2.0", "github:1004")]
    [(request, prompt)] = releases.prompts(issue=12)
    assert request.responder is not None and request.responder.attributes["permission"] == "write"
    assert "**Approved by dave.**" in prompt.body
