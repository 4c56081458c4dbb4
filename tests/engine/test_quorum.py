"""Approvals that take several people: `approvers(..., quorum=N)` over the gateway's people and groups, on SQLite
+ in-process jobs and on PostgreSQL + a real RQ worker."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.answers.submit import ResponseResult, submit_responses
from engine.errors import InvalidInput, RequestClosed
from engine.people import save_group, save_person
from engine.policies import approvers
from engine.protocol import InputResponse, api_key_principal
from engine.store.queries import get_request
from tests.conftest import Stack, make_stack
from tests.support.agent import read_ledger, script


def ran(tool: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool]


def release_group(stack: Stack) -> None:
    """alice (Alice Ng: her API key and her Slack account), bob and carol are the release group."""
    with stack.rt.transaction() as db:
        save_person(db, "alice", "Alice Ng", ["alice", "slack:T1:UALICE"])
        save_group(db, "release", ["person:alice", "bob", "carol"])


def answer_as(stack: Stack, principal_id: str, request_id: str, option: str, text: str | None = None,
              authenticator: str = "api-key") -> ResponseResult:
    principal = api_key_principal(principal_id).model_copy(update={"authenticator": authenticator})
    [result] = submit_responses(stack.rt, principal, [InputResponse(request_id=request_id, option_id=option,
                                                                    text=text)])
    stack.wait_idle()
    return result


def test_two_of_three_approve_and_the_same_person_counts_once(stack: Stack) -> None:
    release_group(stack)
    sid, _ = stack.start(script([("group_release", {"version": "1.4"})]))
    [request] = stack.pending(sid)

    first = stack.answer(request["requestId"], "approve", who="alice")
    again = answer_as(stack, "slack:T1:UALICE", request["requestId"], "approve", authenticator="slack")

    assert (first.status, first.reason) == ("pending", "1 of 2 approvals: Alice Ng")
    assert first.request.approvals is not None and first.request.approvals.have == 1
    assert (again.status, again.reason) == ("pending", "1 of 2 approvals: Alice Ng")
    assert ran("group_release") == []
    shown = get_request(stack.rt, request["requestId"])["approvals"]
    assert (shown["have"], shown["need"], [a["name"] for a in shown["by"]]) == (1, 2, ["Alice Ng"])

    assert stack.answer(request["requestId"], "approve", who="bob").status == "settled"

    [call] = ran("group_release")
    assert call["responder"] == "bob"
    settled = get_request(stack.rt, request["requestId"])
    assert settled["outcome"] == "approved"
    assert (settled["approvals"]["have"], settled["approvals"]["need"]) == (2, 2)
    assert [a["principal"]["principalId"] for a in settled["approvals"]["by"]] == ["alice", "bob"]
    counted = [e["data"] for e in stack.events(sid) if e["type"] == "approval.candidate" and "approvals" in e["data"]]
    assert [c["approvals"]["have"] for c in counted] == [1, 1]


def test_one_approvers_deny_settles_at_once_with_their_note(stack: Stack) -> None:
    release_group(stack)
    sid, _ = stack.start(script([("group_release", {"version": "1.4"})]))
    [request] = stack.pending(sid)
    assert stack.answer(request["requestId"], "approve", who="bob").status == "pending"

    assert stack.answer(request["requestId"], "deny", text="the changelog is wrong", who="carol").status == "settled"

    assert ran("group_release") == []
    assert "Denied by carol: the changelog is wrong" in stack.turn(sid)["result"]


def test_someone_outside_the_group_is_refused_and_counts_for_nothing(stack: Stack) -> None:
    release_group(stack)
    sid, _ = stack.start(script([("group_release", {"version": "1.4"})]))
    [request] = stack.pending(sid)

    refused = answer_as(stack, "mallory", request["requestId"], "approve")
    assert (refused.status, refused.reason) == ("refused", "only group:release may answer this request")
    assert stack.answer(request["requestId"], "approve", who="bob").status == "pending"

    assert get_request(stack.rt, request["requestId"])["approvals"]["have"] == 1


def test_an_editable_tool_whose_approval_takes_a_quorum_is_not_offered_for_editing(stack: Stack) -> None:
    release_group(stack)
    sid, _ = stack.start(script([("group_release", {"version": "1.4"})]))
    [request] = stack.pending(sid)
    events = len(stack.events(sid))
    assert request["editable"] is False  # several people approve what was proposed: no Edit on any channel

    with pytest.raises(InvalidInput, match="is not editable"):
        stack.answer(request["requestId"], "approve", who="bob", edited={"version": "1.5"})

    assert len(stack.events(sid)) == events
    assert get_request(stack.rt, request["requestId"])["approvals"]["have"] == 0


def test_an_edited_approve_under_an_agents_quorum_policy_is_refused_and_changes_nothing(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tool is editable and sets no response policy of its own: the agent's takes two people, so the request
    shows as editable (its tool says so) but an edit is refused, since it would run on one person's word."""
    monkeypatch.setattr(stack.rt.agent, "response_policy", approvers("alice", "bob", quorum=2))
    sid, _ = stack.start(script([("adjustable_refund", {"charge_id": "ch_1", "amount": 200})]))
    [request] = stack.pending(sid)
    events = len(stack.events(sid))

    with pytest.raises(InvalidInput, match="takes 2 people's approvals: approve it as proposed"):
        stack.answer(request["requestId"], "approve", who="bob", edited={"charge_id": "ch_1", "amount": 20})

    assert len(stack.events(sid)) == events
    assert stack.answer(request["requestId"], "approve", who="bob").status == "pending"  # as proposed: counted


def test_a_quorum_is_a_whole_number_of_people() -> None:
    assert approvers("group:release", quorum=3).quorum == 3
    assert approvers(["bob", "carol"]).who == ("bob", "carol")
    for wrong in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="quorum"):
            approvers("group:release", quorum=wrong)  # type: ignore[arg-type]


@pytest.fixture
def on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    with make_stack(request, "postgres", tmp_path) as built:
        yield built


def test_twenty_approvers_at_once_settle_once_with_exactly_the_quorum(on_postgres: Stack) -> None:
    stack = on_postgres
    crowd = [f"approver{n}" for n in range(20)]
    with stack.rt.transaction() as db:
        save_group(db, "crowd", crowd)
    sid, _ = stack.start(script([("crowd_release", {"version": "2.0"})]))
    [request] = stack.pending(sid)
    start = threading.Barrier(len(crowd))
    outcomes: list[str] = []

    def approve(who: str) -> None:
        start.wait()
        try:
            [result] = submit_responses(stack.rt, api_key_principal(who),
                                        [InputResponse(request_id=request["requestId"], option_id="approve")])
            outcomes.append(result.status)
        except RequestClosed:
            outcomes.append("closed")

    threads = [threading.Thread(target=approve, args=(who,)) for who in crowd]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    stack.wait_idle()

    assert len(outcomes) == 20
    assert outcomes.count("settled") == 1 and outcomes.count("pending") == 2
    assert len(ran("crowd_release")) == 1
    settled = get_request(stack.rt, request["requestId"])
    assert settled["outcome"] == "approved"
    by = [a["principal"]["principalId"] for a in settled["approvals"]["by"]]
    assert (settled["approvals"]["have"], settled["approvals"]["need"], len(set(by))) == (3, 3, 3)
    candidates = [c for r in stack.turn(sid)["requests"] for c in r["candidates"]]
    assert sorted(c["outcome"] for c in candidates if c["outcome"] in ("allowed", "pending")) == \
        ["allowed", "pending", "pending"]
