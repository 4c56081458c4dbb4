"""POST /api/requests with `approvers` and `quorum`: an external approval that takes several people answers 202
with the count until the last one approves (SQLite + in-process jobs: nothing here depends on the stack)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.people import save_group, save_person
from tests.conftest import Stack
from tests.gateway.test_api import expect_error
from tests.gateway.test_api_requests import APPROVAL, QUESTION, api_stack, nothing_stored


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Stack]:
    stack = api_stack(tmp_path)
    yield stack
    stack.close()


def counted(approvals: dict[str, Any]) -> tuple[int, int, list[str]]:
    return approvals["have"], approvals["need"], [a["principal"]["principalId"] for a in approvals["by"]]


def test_two_of_three_answer_202_with_the_count_then_200(api: Stack) -> None:
    agent = api.client("bot:agent")
    opened = agent.post("/api/requests", json={**APPROVAL, "approvers": ["alice", "bob", "carol"], "quorum": 2})
    assert opened.status_code == 201, opened.get_data(as_text=True)
    request = opened.get_json()
    assert (request["quorum"], counted(request["approvals"])) == (2, (0, 2, []))
    url = f"/api/requests/{request['requestId']}"

    first = api.client("alice").patch(url, json={"optionId": "approve"})
    again = api.client("alice").patch(url, json={"optionId": "approve"})

    assert (first.status_code, again.status_code) == (202, 202)
    assert counted(first.get_json()["approvals"]) == (1, 2, ["alice"])
    assert counted(again.get_json()["approvals"]) == (1, 2, ["alice"])
    shown = agent.get(url).get_json()
    assert (shown["status"], counted(shown["approvals"])) == ("pending", (1, 2, ["alice"]))
    [listed] = api.client("bob:operator").get("/api/requests?status=pending").get_json()["requests"]
    assert counted(listed["approvals"]) == (1, 2, ["alice"])  # the console's inbox shows the count too

    settled = api.client("carol").patch(url, json={"optionId": "approve"})

    assert settled.status_code == 200
    body = settled.get_json()
    assert (body["status"], body["outcome"], counted(body["approvals"])) == ("resolved", "approved",
                                                                             (2, 2, ["alice", "carol"]))
    assert counted(agent.get(url).get_json()["approvals"]) == (2, 2, ["alice", "carol"])
    late = api.client("bob").patch(url, json={"optionId": "approve"})
    assert late.status_code == 409


def test_one_approvers_deny_settles_it_at_once(api: Stack) -> None:
    agent = api.client("bot:agent")
    request = agent.post("/api/requests", json={**APPROVAL, "approvers": ["alice", "bob", "carol"],
                                                "quorum": 2}).get_json()
    url = f"/api/requests/{request['requestId']}"
    assert api.client("alice").patch(url, json={"optionId": "approve"}).status_code == 202

    denied = api.client("bob").patch(url, json={"optionId": "deny", "text": "not this week"})

    assert denied.status_code == 200
    assert (denied.get_json()["outcome"], denied.get_json()["response"]["text"]) == ("denied", "not this week")


@pytest.mark.parametrize(("body", "field", "problem"), [
    ({**APPROVAL, "approvers": ["alice", "bob"], "quorum": 3}, "quorum", "its approvers name 2"),
    ({**QUESTION, "quorum": 2}, "quorum", "only a tool approval takes a quorum"),
    ({**APPROVAL, "approvers": ["alice", "bob"], "quorum": 2, "editable": True}, "editable", "approved as proposed"),
    ({**APPROVAL, "approvers": ["github-team:acme"]}, "approvers.0", "<org>/<team slug>"),
    ({**APPROVAL, "approvers": ["alice", "person:"]}, "approvers.1", "a person's name"),
    ({**APPROVAL, "approvers": ["slack-usergroup:s-lower"]}, "approvers.0", "a Slack user group id"),
    ({**APPROVAL, "quorum": 0}, "quorum", ""),
])
def test_approvers_that_name_nobody_and_quorums_that_cannot_be_met_are_422(
        api: Stack, body: dict[str, Any], field: str, problem: str) -> None:
    error = expect_error(api.client("bot:agent").post("/api/requests", json=body), 422, "invalid_request")

    [named] = [d for d in error["details"] if d["field"] == field]
    assert problem in named["problem"]
    nothing_stored(api)


def test_a_quorum_over_a_group_may_exceed_the_items_named(api: Stack) -> None:
    response = api.client("bot:agent").post("/api/requests", json={**APPROVAL, "approvers": ["group:release"],
                                                                     "quorum": 3})

    assert response.status_code == 201, response.get_data(as_text=True)
    assert response.get_json()["approvers"] == ["group:release"]


def test_the_members_of_a_group_named_see_and_answer_it_and_nobody_else_does(api: Stack) -> None:
    with api.rt.transaction() as db:
        save_person(db, "alice", "Alice Ng", ["slack:T1:UALICE", "alice"])
        save_group(db, "release", ["person:alice", "bob"])
    request = api.client("bot:agent").post("/api/requests", json={**APPROVAL, "approvers": ["group:release"],
                                                                    "quorum": 2}).get_json()
    url = f"/api/requests/{request['requestId']}"

    assert api.client("carol").get(url).status_code == 404
    assert [r["requestId"] for r in api.client("bob").get("/api/requests").get_json()["requests"]] == \
        [request["requestId"]]
    first = api.client("alice").patch(url, json={"optionId": "approve"})
    assert (first.status_code, first.get_json()["approvals"]["by"][0]["name"]) == (202, "Alice Ng")

    assert api.client("bob").patch(url, json={"optionId": "approve"}).status_code == 200
