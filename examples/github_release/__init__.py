"""A release approved on a GitHub issue: anyone with write access to the repository may approve it."""

from __future__ import annotations

import re
from typing import Any

from engine import Agent, ApprovalPolicy, ResponseContext, ToolCallRequest, ToolContext, always, tool
from examples.scripted import one_call

WRITE_OR_BETTER = {"write", "maintain", "admin"}


def write_access_or_better(ctx: ResponseContext) -> dict[str, str]:
    """A GitHub principal's `permission` is their role on the repository, as GitHub's permission API gave it."""
    who = ctx.response.responder
    if who.authenticator == "github" and who.attributes.get("permission") in WRITE_OR_BETTER:
        return {"status": "allowed"}
    return {"status": "rejected", "reason": "releasing needs write access to the repository"}


@tool(approval=ApprovalPolicy(request=always(), response=write_access_or_better), title="release")
def publish_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """Publish a release of the repository (here: say which; call your release pipeline instead)."""
    approver = ctx.approval.responder if ctx.approval else None
    return {"version": version, "approvedBy": approver.display_name if approver else None}


def release(text: str) -> ToolCallRequest | None:
    """`release v1.2.0` -> publish_release(version="1.2.0")."""
    found = re.search(r"\brelease\s+v?(\d+\.\d+\.\d+\S*)", text, re.IGNORECASE)
    return ToolCallRequest("publish_release", {"version": found.group(1)}) if found else None


agent = Agent(
    name="releases",
    instructions="You publish releases once a maintainer approves.",
    model=one_call(release, lambda r: f"Released {r['version']} (approved by {r['approvedBy']}).",
                   usage="Ask me to `release v1.2.0`: a collaborator with write access approves it."),
    tools=[publish_release],
)
