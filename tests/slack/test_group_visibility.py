"""The members of a Slack user group see the external requests it may approve before they answer, whatever
process looked the group up: its members are stored for every process (engine/channels/groups.py), on SQLite with
in-process jobs and on PostgreSQL with a real worker (which looks the group up there, not in the web process)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import func, select

from engine.answers.submit import submit_responses
from engine.jobs.executors import InlineExecutor
from engine.jobs.runtime import Runtime
from engine.people import save_person
from engine.protocol import InputResponse, api_key_principal
from engine.store.db import Database
from engine.store.tables import PlatformGroup, PlatformGroupMember
from tests.gateway.test_api_requests import APPROVAL
from tests.slack.workspace import USERS, Workspace, workspace
from tests.support.agent import agent as test_agent
from tests.support.fake_slack import TEAM


@pytest.fixture(params=["sqlite", "postgres"])
def slack_either(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    with workspace(request, request.param, tmp_path) as built:
        yield built


def opened(slack: Workspace, usergroup: str) -> str:
    """An agent's external approval whose approvers are the Slack user group `usergroup`; its id, once every job
    it set off ran."""
    with slack.stack.rt.transaction() as db:  # alice's API key and her Slack account are one person
        save_person(db, "alice", "Alice Ng", ["alice", f"slack:{TEAM}:{USERS['alice']}"])
    made = slack.stack.client("bot:agent").post("/api/requests", json={
        **APPROVAL, "approvers": [f"slack-usergroup:{usergroup}"]})
    assert made.status_code == 201, made.get_data(as_text=True)
    slack.wait_idle()
    request_id: str = made.get_json()["requestId"]
    return request_id


def listed(client: FlaskClient) -> list[str]:
    response = client.get("/api/requests", query_string={"status": "pending"})
    assert response.status_code == 200, response.get_data(as_text=True)
    return [request["requestId"] for request in response.get_json()["requests"]]


def stored_groups(slack: Workspace) -> dict[str, Any]:
    with slack.stack.rt.db.read() as db:
        return {"groups": db.execute(select(func.count()).select_from(PlatformGroup)).scalar_one(),
                "members": sorted(db.execute(select(PlatformGroupMember.principal_id)).scalars())}


def test_a_member_of_the_user_group_sees_the_request_before_answering_and_others_do_not(
        slack_either: Workspace) -> None:
    slack = slack_either
    slack.fake.usergroups["S0RELEASE"] = [USERS["alice"], USERS["carol"]]
    request_id = opened(slack, "S0RELEASE")
    alice, bob = slack.stack.client("alice"), slack.stack.client("bob")

    assert listed(alice) == [request_id]
    assert alice.get(f"/api/requests/{request_id}").status_code == 200
    assert listed(bob) == []
    assert bob.get(f"/api/requests/{request_id}").status_code == 404
    assert len(slack.fake.called("usergroups.users.list")) == 1  # the job looked it up once the request opened

    answered = alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"})

    assert answered.status_code == 200, answered.get_data(as_text=True)
    assert answered.get_json()["outcome"] == "approved"
    assert len(slack.fake.called("usergroups.users.list")) == 1  # judged with the stored members


def test_every_process_shares_one_lookup_of_a_user_group(slack_either: Workspace) -> None:
    """The lookup the request's job made (in the worker, on PostgreSQL) serves the web process and any other
    runtime on the same database while it is fresh."""
    slack = slack_either
    slack.fake.usergroups["S0RELEASE"] = [USERS["alice"], USERS["carol"]]
    opened(slack, "S0RELEASE")
    members = frozenset({f"slack:{TEAM}:{USERS['alice']}", f"slack:{TEAM}:{USERS['carol']}"})
    other = Runtime(Database(slack.stack.settings.database_url), test_agent, InlineExecutor(1),
                    channels=slack.stack.rt.channels)
    try:
        assert slack.stack.rt.groups.members("slack-usergroup:S0RELEASE") == members
        assert other.groups.members("slack-usergroup:S0RELEASE") == members
    finally:
        other.executor.shutdown()  # type: ignore[attr-defined]
        other.db.dispose()

    assert len(slack.fake.called("usergroups.users.list")) == 1


def test_a_failed_lookup_stores_nothing_shows_the_request_to_nobody_and_refuses(slack_either: Workspace) -> None:
    slack = slack_either
    request_id = opened(slack, "S0GONE")  # Slack answers no_such_subteam
    alice = slack.stack.client("alice")

    assert stored_groups(slack) == {"groups": 0, "members": []}
    assert listed(alice) == []

    assert alice.patch(f"/api/requests/{request_id}", json={"optionId": "approve"}).status_code == 404
    [refused] = submit_responses(slack.stack.rt, api_key_principal("alice"),  # as a channel would bring it
                                 [InputResponse(request_id=request_id, option_id="approve")])

    assert refused.status == "refused"
    assert "the members of slack-usergroup:S0GONE could not be looked up" in str(refused.reason)
    assert stored_groups(slack) == {"groups": 0, "members": []}
    assert slack.stack.client("bob:operator").get(f"/api/requests/{request_id}").get_json()["status"] == "pending"
