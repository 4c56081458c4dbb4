"""People and groups (engine/people.py) on SQLite and PostgreSQL: a person's principals count as that person, a
principal is at most one person's, groups expand to the principal ids they stand for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.answers.conversation import cancel_turn
from engine.answers.submit import submit_responses
from engine.errors import Conflict, InvalidInput, NotFound, NotPermitted
from engine.people import (
    Person,
    delete_group,
    delete_person,
    display_name,
    expand,
    group,
    group_members,
    groups,
    people,
    person_key,
    person_of,
    person_principals,
    same_person,
    save_group,
    save_person,
)
from engine.policies import ResponseContext, ResponseInfo, SessionInfo, escalated, requester_only
from engine.protocol import InputRequestOut, InputResponse, Principal, api_key_principal
from engine.store.db import Database
from tests.conftest import Stack, sqlite_settings, truncate_all
from tests.support.agent import read_ledger, script

ALICE = ["slack:T1:U1", "twilio:+15551230001", "github:1001", "alice"]


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


@pytest.fixture(params=["sqlite", "postgres"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    if request.param == "postgres":
        url = request.getfixturevalue("postgres_url")
        truncate_all(url)
    else:
        url = f"sqlite:///{tmp_path / 'hitl.db'}"
    db = Database(url)
    db.upgrade()
    yield db
    db.dispose()


def test_a_persons_principals_count_as_that_person(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", "Alice Ng", ALICE)
        save_person(db, "bob", None, ["slack:T1:U2"])
    with database.read() as db:
        alice = person_of(db, "twilio:+15551230001")
        assert alice is not None and alice.name == "alice" and alice.display_name == "Alice Ng"
        assert alice.principals == tuple(ALICE)  # in the order given: her first linked channel first
        assert person_principals(db, "alice") == ALICE
        assert {person_key(db, p) for p in ALICE} == {"person:alice"}
        assert person_key(db, "slack:T1:U9") == "slack:T1:U9"  # nobody's: counts on its own
        assert same_person(db, "slack:T1:U1", "twilio:+15551230001")
        assert not same_person(db, "slack:T1:U1", "slack:T1:U2")
        assert display_name(db, "github:1001") == "Alice Ng"
        assert display_name(db, "slack:T1:U2") == "bob"  # no display name given: the name
        assert display_name(db, "slack:T1:U9") is None
        assert [p.name for p in people(db)] == ["alice", "bob"]


def test_a_principal_belongs_to_at_most_one_person(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", "Alice Ng", ALICE)
    with pytest.raises(Conflict, match="twilio:\\+15551230001 is already alice's") as raised, database.write() as db:
        save_person(db, "mallory", None, ["slack:T1:U7", "twilio:+15551230001"])
    assert raised.value.details == {"principal": "twilio:+15551230001", "person": "alice"}
    with pytest.raises(Conflict, match="already named alice"), database.write() as db:
        save_person(db, "alice", None, ["slack:T1:U8"])
    with database.read() as db:
        assert person_of(db, "slack:T1:U7") is None  # nothing of mallory's was saved
        assert person_principals(db, "alice") == ALICE


def test_replacing_a_person_relinks_their_principals(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", "Alice Ng", ALICE)
        save_person(db, "alice", "Alice N.", ["twilio:+15551230001", "slack:T1:U5"], replace=True)
    with database.read() as db:
        assert person_principals(db, "alice") == ["twilio:+15551230001", "slack:T1:U5"]
        assert person_of(db, "slack:T1:U1") is None  # unlinked: it counts on its own again
        assert display_name(db, "slack:T1:U5") == "Alice N."
    with pytest.raises(NotFound), database.write() as db:
        save_person(db, "zed", None, [], replace=True)


@pytest.mark.parametrize(("name", "display", "principals", "field"), [
    ("al ice", None, [], "name"),
    ("", None, [], "name"),
    ("alice", "  ", [], "displayName"),
    ("alice", None, ["slack:T1:U1", ""], "principals[1]"),
    ("alice", None, ["has space"], "principals[0]"),
    ("alice", None, ["group:finance"], "principals[0]"),
    ("alice", None, ["person:bob"], "principals[0]"),
    ("alice", None, ["slack:T1:U1", "slack:T1:U1"], "principals[1]"),
])
def test_bad_input_names_the_field_and_saves_nothing(database: Database, name: str, display: str | None,
                                                     principals: list[str], field: str) -> None:
    with pytest.raises(InvalidInput) as raised, database.write() as db:
        save_person(db, name, display, principals)
    assert raised.value.details == {"field": field}
    with database.read() as db:
        assert people(db) == []


def test_groups_expand_to_the_principals_of_their_people(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", "Alice Ng", ALICE)
        save_person(db, "carol", "Carol", ["slack:T1:U3", "twilio:+15551230003"])
        save_group(db, "finance", ["person:alice", "slack:T1:U3", "github:2002"])
    with database.read() as db:
        assert group_members(db, "finance") == ["person:alice", "slack:T1:U3", "github:2002"]
        # U3 is carol's: her number stands for her too
        assert expand(db, "group:finance") == {*ALICE, "slack:T1:U3", "twilio:+15551230003", "github:2002"}
        assert expand(db, "person:alice") == set(ALICE)
        assert expand(db, "github:2002") == {"github:2002"}
        assert expand(db, "group:nobody") == set() and expand(db, "person:nobody") == set()
        assert [g.wire() for g in groups(db)] == [
            {"name": "finance", "members": ["person:alice", "slack:T1:U3", "github:2002"]}]


def test_group_members_are_existing_people_or_principal_ids(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", None, ["slack:T1:U1"])
    for members, field in [(["person:zed"], "members[0]"), (["slack:T1:U1", "group:ops"], "members[1]"),
                           (["slack-usergroup:S1"], "members[0]"), (["person:alice", "person:alice"], "members[1]")]:
        with pytest.raises(InvalidInput) as raised, database.write() as db:
            save_group(db, "finance", members)
        assert raised.value.details == {"field": field}
    with database.write() as db:
        save_group(db, "finance", ["person:alice"])
    with pytest.raises(Conflict), database.write() as db:
        save_group(db, "finance", [])
    with database.write() as db:
        save_group(db, "finance", ["slack:T1:U4", "person:alice"], replace=True)
    with database.read() as db:
        assert group_members(db, "finance") == ["slack:T1:U4", "person:alice"]


def test_deleting_a_person_takes_them_out_of_their_groups(database: Database) -> None:
    with database.write() as db:
        save_person(db, "alice", "Alice Ng", ALICE)
        save_group(db, "finance", ["person:alice", "slack:T1:U3"])
        save_group(db, "ops", ["person:alice"])
    with database.write() as db:
        assert delete_person(db, "alice") == ["finance", "ops"]
    with database.read() as db:
        assert person_of(db, "slack:T1:U1") is None
        assert group_members(db, "finance") == ["slack:T1:U3"]
    with database.write() as db:
        save_person(db, "alice2", None, ["slack:T1:U1"])  # her principals are free again
        delete_group(db, "ops")
    with database.read() as db:
        assert group(db, "ops") is None
    with pytest.raises(NotFound), database.write() as db:
        delete_person(db, "alice")
    with pytest.raises(NotFound), database.write() as db:
        delete_group(db, "ops")


SMS = Principal(authenticator="twilio", issuer="twilio:AC1", principal_type="user", principal_id="twilio:+15551230001",
                attributes={"userName": "+15551230001"})


def answered(stack: Stack, request_id: str, who: Principal) -> str:
    [result] = submit_responses(stack.rt, who, [InputResponse(request_id=request_id, option_id="approve")])
    stack.wait_idle()
    return result.status


def test_the_requester_approves_from_any_principal_of_theirs(stack: Stack) -> None:
    """alice asks with her key; her phone's answer is refused until it is linked to her, then it approves, and
    everything that records the answer names her."""
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    [request] = stack.pending(sid)
    assert answered(stack, request["requestId"], SMS) == "refused"
    with stack.rt.db.write() as db:
        save_person(db, "alice", "Alice Ng", ["alice", "twilio:+15551230001"])
        save_person(db, "carol", None, ["carol"])
    assert answered(stack, request["requestId"], api_key_principal("carol")) == "refused"  # another person
    assert answered(stack, request["requestId"], SMS) == "settled"

    [ran] = [e for e in read_ledger() if e["tool"] == "refund"]
    assert (ran["requester"], ran["responder"]) == ("alice", "twilio:+15551230001")
    settled = stack.history(sid)["turns"][0]["requests"][0]
    assert Principal.model_validate(settled["responder"]).display_name == "Alice Ng via SMS"


def test_a_custom_policy_sees_both_people(sqlite_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str | None, str | None]] = []

    def managers_only(ctx: ResponseContext) -> dict[str, str]:
        seen.append((ctx.responder_person and ctx.responder_person.name,
                     ctx.requester_person and ctx.requester_person.name))
        return {"status": "allowed" if ctx.responder_person and ctx.responder_person.name == "bob" else "rejected"}

    monkeypatch.setattr(sqlite_stack.rt.agent, "response_policy", managers_only)
    with sqlite_stack.rt.db.write() as db:
        save_person(db, "alice", "Alice Ng", ["alice"])
        save_person(db, "bob", "Bob Li", ["twilio:+15551230002"])
    sid, _ = sqlite_stack.start(script([("lookup", {"order_id": "o-1"}), ("refund", {"charge_id": "c", "amount": 1})]))
    [request] = sqlite_stack.pending(sid)
    assert answered(sqlite_stack, request["requestId"], api_key_principal("carol")) == "refused"
    bob = SMS.model_copy(update={"principal_id": "twilio:+15551230002"})
    assert answered(sqlite_stack, request["requestId"], bob) == "settled"
    assert seen == [(None, "alice"), ("bob", "alice")]


def test_an_escalation_approver_answers_from_another_principal_of_theirs() -> None:
    bob = Person(name="bob", display_name="Bob Li", principals=("slack:T1:U2", "twilio:+15551230002"))
    policy = escalated(requester_only, frozenset({"slack:T1:U2"}))
    request = InputRequestOut.model_validate({
        "requestId": "req_1", "sessionId": "ses_1", "turnId": "turn_1", "kind": "tool-approval", "prompt": "Refund?",
        "action": None, "options": [], "allowFreeform": False, "display": "confirmation",
        "requestedBy": api_key_principal("alice").wire(), "createdAt": "2026-01-01T00:00:00Z", "expiresAt": None,
        "status": "pending", "outcome": None})
    session = SessionInfo(id="ses_1", agent="a", channel="api", address="", initiator=None)
    by_phone = SMS.model_copy(update={"principal_id": "twilio:+15551230002"})
    context = ResponseContext(request=request, response=ResponseInfo(by_phone, "approve", None), session=session,
                              responder_person=bob)
    assert policy(context) == {"status": "allowed"}
    stranger = ResponseContext(request=request, response=ResponseInfo(by_phone, "approve", None), session=session)
    assert policy(stranger)["status"] == "rejected"


def test_a_turns_own_person_cancels_it_from_another_principal_of_theirs(sqlite_stack: Stack) -> None:
    sid, turn_id = sqlite_stack.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    with pytest.raises(NotPermitted, match="only alice or an operator may cancel"):
        cancel_turn(sqlite_stack.rt, sid, SMS)
    with sqlite_stack.rt.db.write() as db:
        save_person(db, "alice", "Alice Ng", ["alice", "twilio:+15551230001"])
    assert cancel_turn(sqlite_stack.rt, sid, SMS) == turn_id
    sqlite_stack.wait_idle()
    assert sqlite_stack.turn(sid)["status"] == "cancelled"
