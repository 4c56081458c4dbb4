"""People and groups (engine/people.py) on SQLite and PostgreSQL: a person's principals count as that person, a
principal is at most one person's, groups expand to the principal ids they stand for."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from engine.errors import Conflict, InvalidInput, NotFound
from engine.people import (
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
from engine.store.db import Database
from tests.conftest import truncate_all

ALICE = ["slack:T1:U1", "twilio:+15551230001", "github:1001", "alice"]


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
