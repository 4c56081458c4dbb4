"""/api/people and /api/groups: an operator names people and groups; a principal is one person's; bad input is a
422 naming the field and stores nothing; any other key finds no such routes (SQLite + in-process jobs)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.answers.submit import submit_responses
from engine.protocol import InputResponse, api_key_principal
from tests.conftest import Stack, sqlite_settings
from tests.gateway.test_api import expect_error
from tests.support.agent import script

ALICE = {"name": "alice", "displayName": "Alice Ng",
         "principals": ["slack:T1:U1", "twilio:+15551230001", "github:1001", "alice"]}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    yield stack
    stack.close()


def test_an_operator_names_a_person_and_links_their_principals(api: Stack) -> None:
    ops = api.client("bob:operator")
    created = ops.post("/api/people", json=ALICE)
    assert created.status_code == 201, created.get_data(as_text=True)
    assert created.get_json() == ALICE
    assert ops.post("/api/people", json={"name": "dan", "principals": []}).get_json()["displayName"] == "dan"
    assert ops.get("/api/people").get_json() == {"people": [ALICE, {"name": "dan", "displayName": "dan",
                                                                     "principals": []}]}
    assert ops.get("/api/people/alice").get_json() == ALICE
    replaced = ops.put("/api/people/alice", json={"displayName": "Alice N.", "principals": ["twilio:+15551230001"]})
    assert replaced.get_json() == {"name": "alice", "displayName": "Alice N.", "principals": ["twilio:+15551230001"]}
    # her old Slack user is free again
    assert ops.post("/api/people", json={"name": "al", "principals": ["slack:T1:U1"]}).status_code == 201
    assert ops.delete("/api/people/alice").get_json() == {"deleted": "alice", "leftGroups": []}
    expect_error(ops.get("/api/people/alice"), 404, "not_found")
    expect_error(ops.delete("/api/people/alice"), 404, "not_found")
    expect_error(ops.put("/api/people/alice", json={"principals": []}), 404, "not_found")


def test_a_principal_already_someone_elses_is_a_conflict_naming_it(api: Stack) -> None:
    ops = api.client("bob:operator")
    ops.post("/api/people", json=ALICE)
    error = expect_error(ops.post("/api/people", json={"name": "mallory", "principals": ["slack:T1:U7", "alice"]}),
                         409, "conflict")
    assert error["details"] == {"principal": "alice", "person": "alice"}
    assert "alice is already alice's" in error["message"]
    expect_error(ops.post("/api/people", json={**ALICE, "principals": []}), 409, "conflict")  # the name is taken
    expect_error(ops.get("/api/people/mallory"), 404, "not_found")  # nothing stored


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "al ice", "principals": []}, "name"),
    ({"name": "alice", "principals": ["slack:T1:U1", "two words"]}, "principals[1]"),
    ({"name": "alice", "principals": ["group:finance"]}, "principals[0]"),
    ({"name": "alice", "displayName": "", "principals": []}, "displayName"),
])
def test_bad_people_are_a_422_naming_the_field(api: Stack, body: dict[str, object], field: str) -> None:
    ops = api.client("bob:operator")
    assert expect_error(ops.post("/api/people", json=body), 422, "invalid_input")["details"] == {"field": field}
    assert ops.get("/api/people").get_json() == {"people": []}


@pytest.mark.parametrize(("body", "field"), [
    ({"principals": []}, "name"),
    ({"name": "alice", "principals": "slack:T1:U1"}, "principals"),
    ({"name": "alice", "principals": [], "role": "admin"}, "role"),
])
def test_bodies_that_do_not_fit_are_a_422_naming_the_field(api: Stack, body: dict[str, object], field: str) -> None:
    error = expect_error(api.client("bob:operator").post("/api/people", json=body), 422, "invalid_body")
    assert error["details"][0]["field"] == field


def test_a_put_does_not_rename(api: Stack) -> None:
    ops = api.client("bob:operator")
    ops.post("/api/people", json=ALICE)
    error = expect_error(ops.put("/api/people/alice", json={**ALICE, "name": "alicia"}), 422, "invalid_input")
    assert error["details"] == {"field": "name"}
    assert ops.put("/api/people/alice", json=ALICE).get_json() == ALICE  # what a GET gave, sent back as it is


def test_groups_hold_existing_people_and_principal_ids(api: Stack) -> None:
    ops = api.client("bob:operator")
    ops.post("/api/people", json=ALICE)
    finance = {"name": "finance", "members": ["person:alice", "slack:T1:U3"]}
    created = ops.post("/api/groups", json=finance)
    assert created.status_code == 201 and created.get_json() == finance
    assert ops.get("/api/groups").get_json() == {"groups": [finance]}
    error = expect_error(ops.post("/api/groups", json={"name": "ops", "members": ["slack:T1:U3", "person:zed"]}),
                         422, "invalid_input")
    assert error["details"] == {"field": "members[1]"} and "no person is named zed" in error["message"]
    expect_error(ops.get("/api/groups/ops"), 404, "not_found")
    expect_error(ops.post("/api/groups", json=finance), 409, "conflict")
    assert ops.put("/api/groups/finance", json={"members": ["github:2002"]}).get_json() == {
        "name": "finance", "members": ["github:2002"]}
    ops.put("/api/groups/finance", json=finance)
    # deleting a person takes them out of their groups
    assert ops.delete("/api/people/alice").get_json() == {"deleted": "alice", "leftGroups": ["finance"]}
    assert ops.get("/api/groups/finance").get_json() == {"name": "finance", "members": ["slack:T1:U3"]}
    assert ops.delete("/api/groups/finance").get_json() == {"deleted": "finance"}
    expect_error(ops.get("/api/groups/finance"), 404, "not_found")


@pytest.mark.parametrize("who", ["alice", "bot:agent"])
def test_other_keys_find_no_people_nor_groups(api: Stack, who: str) -> None:
    api.client("bob:operator").post("/api/people", json=ALICE)
    api.client("bob:operator").post("/api/groups", json={"name": "finance", "members": []})
    client = api.client(who)
    for response in [client.get("/api/people"), client.get("/api/people/alice"),
                     client.post("/api/people", json={"name": "eve", "principals": ["alice"]}),
                     client.put("/api/people/alice", json={"principals": ["bob"]}), client.delete("/api/people/alice"),
                     client.get("/api/groups"), client.get("/api/groups/finance"),
                     client.post("/api/groups", json={"name": "x", "members": []}),
                     client.put("/api/groups/finance", json={"members": ["bob"]}),
                     client.delete("/api/groups/finance")]:
        expect_error(response, 404, "not_found")
    assert api.client("bob:operator").get("/api/people/alice").get_json() == ALICE  # unchanged


def test_a_linked_key_answers_for_its_person_and_is_named_as_them(api: Stack) -> None:
    """alice asks through her key; carol's key is refused; alice answers through another principal of hers (as a
    channel would submit it), and the request names her."""
    api.client("bob:operator").post("/api/people", json={**ALICE, "principals": ["alice", "twilio:+15551230001"]})
    session_id, _ = api.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    [request] = api.pending(session_id)
    refused = api.client("carol").patch(f"/api/requests/{request['requestId']}", json={"optionId": "approve"})
    expect_error(refused, 404, "not_found")  # carol is not asked it
    sms = api_key_principal("alice").model_copy(update={"authenticator": "twilio",
                                                        "principal_id": "twilio:+15551230001"})
    [result] = submit_responses(api.rt, sms, [InputResponse(request_id=request["requestId"], option_id="approve")])
    assert result.status == "settled"
    api.wait_idle()
    settled = api.client("alice").get(f"/api/requests/{request['requestId']}").get_json()
    assert settled["outcome"] == "approved"
    assert settled["responder"]["attributes"] == {"person": "alice", "personName": "Alice Ng"}
