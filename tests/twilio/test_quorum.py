"""An approval that takes two people, answered by SMS: the texter is told the count, then the outcome."""

from __future__ import annotations

from engine.people import save_group, save_person
from tests.support.agent import read_ledger, script
from tests.twilio.support import ALICE, Sms


def test_an_sms_approval_short_of_the_quorum_is_answered_with_the_count(sms: Sms) -> None:
    with sms.stack.rt.transaction() as db:
        save_person(db, "alice", "Alice Ng", [f"twilio:{ALICE}", "alice"])
        save_group(db, "release", ["person:alice", "bob", "carol"])
    sms.text(ALICE, script([("group_release", {"version": "7.0"})]))

    sms.text(ALICE, "1")

    assert sms.inbox(ALICE)[-1] == '1 of 2 approvals: Alice Ng for "Approve group release?"; 1 more needed.'
    assert [e for e in read_ledger() if e["tool"] == "group_release"] == []
    [request] = sms.stack.pending(sms.session_at(ALICE))

    sms.stack.answer(request["requestId"], "approve", who="bob")
    sms.wait()

    assert "Approve group release? Approved by Alice Ng, bob." in sms.inbox(ALICE)
    assert [e["version"] for e in read_ledger() if e["tool"] == "group_release"] == ["7.0"]
