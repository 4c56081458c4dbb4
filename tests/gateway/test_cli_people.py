"""`hitl people ...` and `hitl groups ...` over the deployment's database; `hitl show` names the person who
answered through another principal of theirs."""

from __future__ import annotations

from typing import Any

from engine.answers.submit import submit_responses
from engine.protocol import InputResponse, Principal
from tests.conftest import Stack
from tests.support.agent import script
from tests.support.cli import Outcome


def test_an_operator_names_people_and_groups(hitl: Any, embedded: Stack) -> None:
    added = hitl("people", "add", "alice", "slack:T1:U1", "twilio:+15551230001", "--display-name", "Alice Ng")
    assert added.code == 0 and added.out == "added alice (Alice Ng): slack:T1:U1, twilio:+15551230001\n"
    assert hitl("people", "add", "bob", "slack:T1:U2").code == 0
    listed: Outcome = hitl("people", "list")
    assert listed.out.splitlines()[1:] == [
        f"{'alice':20} {'Alice Ng':24} slack:T1:U1 twilio:+15551230001", f"{'bob':20} {'bob':24} slack:T1:U2"]
    # the API sees the same people
    assert embedded.client("bob:operator").get("/api/people/alice").get_json()["principals"] == [
        "slack:T1:U1", "twilio:+15551230001"]

    assert hitl("groups", "add", "finance", "person:alice", "slack:T1:U3").out == \
        "added group finance: person:alice, slack:T1:U3\n"
    assert hitl("groups", "list").out.splitlines()[1:] == [f"{'finance':20} person:alice slack:T1:U3"]
    assert hitl("people", "remove", "alice").out == "removed alice, a member of finance no more\n"
    assert hitl("groups", "list").out.splitlines()[1:] == [f"{'finance':20} slack:T1:U3"]
    assert hitl("groups", "remove", "finance").out == "removed group finance\n"
    assert hitl("groups", "list").out.splitlines()[1:] == []


def test_what_cannot_be_stored_exits_1_saying_why(hitl: Any, embedded: Stack) -> None:
    hitl("people", "add", "alice", "slack:T1:U1")
    taken = hitl("people", "add", "mallory", "slack:T1:U7", "slack:T1:U1")
    assert taken.code == 1 and taken.message == "hitl: slack:T1:U1 is already alice's"
    assert hitl("people", "add", "alice", "slack:T1:U9").message == "hitl: a person is already named alice"
    assert "principals[0]" in hitl("people", "add", "eve", "group:finance").message
    assert hitl("groups", "add", "finance", "person:zed").message == "hitl: `members[0]`: no person is named zed"
    assert hitl("people", "remove", "zed").message == "hitl: no person is named zed"
    assert hitl("groups", "remove", "zed").message == "hitl: no group is named zed"
    assert hitl("people", "list").out.splitlines()[1:] == [f"{'alice':20} {'alice':24} slack:T1:U1"]  # unchanged
    replaced = hitl("people", "add", "alice", "slack:T1:U9", "--replace")
    assert replaced.out == "replaced alice (alice): slack:T1:U9\n"


def test_show_names_the_person_who_answered(hitl: Any, embedded: Stack) -> None:
    hitl("people", "add", "alice", "alice", "twilio:+15551230001", "--display-name", "Alice Ng")
    session_id, _ = embedded.start(script([("refund", {"charge_id": "ch_1", "amount": 20})]))
    [request] = embedded.pending(session_id)
    sms = Principal(authenticator="twilio", issuer="twilio:AC1", principal_type="user",
                    principal_id="twilio:+15551230001")
    [result] = submit_responses(embedded.rt, sms, [InputResponse(request_id=request["requestId"], option_id="approve")])
    assert result.status == "settled"
    embedded.wait_idle()
    out = hitl("show", session_id).out
    assert "[approved by twilio:+15551230001 (twilio, Alice Ng)]" in out
