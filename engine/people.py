"""People and groups (docs/right-people.md): who stands behind the principals the channels record.

A person is a name with the principal ids they use (`slack:T1:U1`, `twilio:+15551230001`, `github:1001`, an API
key's `alice`: `Principal.principal_id`), in the order given; a principal id belongs to at most one person.
Wherever a principal is compared for a decision, a person's principals count as that person (`person_key`,
`same_person`). A group is a named list of members, each `person:<name>` or a principal id; `expand` turns any
of `person:<name>`, `group:<name>` or a principal id into the principal ids it stands for.

Reads take an open database session and never write; the writes (`save_person`, `save_group`, `delete_person`,
`delete_group`) check their input and raise InvalidInput (naming the field), Conflict or NotFound, changing
nothing then. This module knows no platform.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from sqlalchemy import bindparam, delete, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session as DbSession

from engine.errors import Conflict, InvalidInput, NotFound
from engine.protocol import Principal
from engine.store.tables import Group, GroupMember, PersonPrincipal
from engine.store.tables import Person as PersonRow

PERSON = "person:"
GROUP = "group:"
PLATFORM_GROUPS = ("slack-usergroup:", "github-team:")
"""Prefixes of groups whose members a platform keeps (the `approvers` policy looks those up): not principal ids."""
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
"""A person's or a group's name: it goes into `person:<name>` and into URLs as it is."""
MAX_PRINCIPAL_ID = 200
MAX_DISPLAY_NAME = 200


@dataclass(frozen=True)
class Person:
    """Someone behind several principals: `display_name` is how messages name them (their name when none was
    given); `principals` in the order given, their first linked channel first."""

    name: str
    display_name: str
    principals: tuple[str, ...]

    @property
    def key(self) -> str:
        """What counts as one person: `person:<name>`."""
        return PERSON + self.name

    def wire(self) -> dict[str, object]:
        return {"name": self.name, "displayName": self.display_name, "principals": list(self.principals)}


@dataclass(frozen=True)
class GroupInfo:
    """A group and its members as stored (`person:<name>` or principal ids), in the order given."""

    name: str
    members: tuple[str, ...]

    def wire(self) -> dict[str, object]:
        return {"name": self.name, "members": list(self.members)}


_OWNER = select(PersonPrincipal.person).where(PersonPrincipal.principal_id == bindparam("principal"))
_PRINCIPALS = select(PersonPrincipal.principal_id).where(PersonPrincipal.person == bindparam("person")) \
    .order_by(PersonPrincipal.position)
OWNER = _OWNER.scalar_subquery().label("owner")
"""The name of the person the bound `principal` is linked to (NULL: nobody's), as a column: a query the caller
runs anyway carries it, and "is this someone's person?" costs no statement of its own (engine/answers/checks.py)."""
_MEMBERS = select(GroupMember.member).where(GroupMember.group == bindparam("group")).order_by(GroupMember.position)


def _person(db: DbSession, row: PersonRow) -> Person:
    principals = tuple(db.execute(_PRINCIPALS, {"person": row.name}).scalars())
    return Person(name=row.name, display_name=row.display_name or row.name, principals=principals)


def person(db: DbSession, name: str) -> Person | None:
    """The person named `name`, or None."""
    row = db.get(PersonRow, name)
    return _person(db, row) if row is not None else None


def person_of(db: DbSession, principal_id: str) -> Person | None:
    """The person `principal_id` is linked to, or None when it is nobody's."""
    name = db.execute(_OWNER, {"principal": principal_id}).scalar()
    return person(db, name) if name is not None else None


def person_key(db: DbSession, principal_id: str) -> str:
    """What "distinct people" counts: `person:<name>` for a linked principal (all of a person's principals give
    the same key), else the principal id itself."""
    name = db.execute(_OWNER, {"principal": principal_id}).scalar()
    return PERSON + name if name is not None else principal_id


def same_person(db: DbSession, one: str, other: str) -> bool:
    """Whether two principal ids are the same principal or two principals of one person."""
    return one == other or person_key(db, one) == person_key(db, other)


def one_person(db: DbSession, principal: Principal | None, other: Principal | None) -> bool:
    """Whether two principals are one: the same principal, or two principals linked to one person."""
    if principal is None or other is None:
        return False
    if principal.same_as(other):
        return True
    key = person_key(db, principal.principal_id)
    return key.startswith(PERSON) and key == person_key(db, other.principal_id)


def with_person(db: DbSession, principal: Principal, owner: str | None) -> Principal:
    """`principal` with the person it is linked to in its attributes (`person`, `personName`), so whatever records
    it (a candidate, a settled request, their events) names the person: "Alice Ng via SMS". `owner` is that
    person's name, read by the caller's query with the `OWNER` column (None: nobody's; then it is returned as it
    is, with no read)."""
    linked = person(db, owner) if owner is not None else None
    if linked is None:
        return principal
    attributes = {**principal.attributes, "person": linked.name, "personName": linked.display_name}
    return principal.model_copy(update={"attributes": attributes})


def linked_person(db: DbSession, principal: Principal) -> Person | None:
    """The person a principal `with_person` gave was linked to then (read again: as they are now); None, with no
    read, for one that was nobody's."""
    name = principal.attributes.get("person")
    return person(db, str(name)) if name else None


def person_principals(db: DbSession, name: str) -> list[str]:
    """The principal ids of the person `name` in the order given (the first is their first linked channel);
    empty for an unknown person."""
    return list(db.execute(_PRINCIPALS, {"person": name}).scalars())


def display_name(db: DbSession, principal_id: str) -> str | None:
    """How messages name the person behind `principal_id` ("Alice Ng"), or None when it is nobody's."""
    linked = person_of(db, principal_id)
    return linked.display_name if linked is not None else None


def group_members(db: DbSession, name: str) -> list[str]:
    """The members of group `name` as stored (`person:<name>` or principal ids), in the order given; empty for an
    unknown group."""
    return list(db.execute(_MEMBERS, {"group": name}).scalars())


def expand(db: DbSession, who: str) -> set[str]:
    """The principal ids `who` stands for: a person's (`person:<name>`), every member's of a group
    (`group:<name>`, whose members may be persons), or a principal id with its person's other principals (when
    linked, any of them is that person). An unknown person or group stands for nobody."""
    if who.startswith(PERSON):
        return set(person_principals(db, who[len(PERSON):]))
    if who.startswith(GROUP):
        found: set[str] = set()
        for member in group_members(db, who[len(GROUP):]):
            found |= expand(db, member)
        return found
    linked = person_of(db, who)
    return set(linked.principals) if linked is not None else {who}


def people(db: DbSession) -> list[Person]:
    """Every person, by name."""
    return [_person(db, row) for row in db.execute(select(PersonRow).order_by(PersonRow.name)).scalars()]


def group(db: DbSession, name: str) -> GroupInfo | None:
    """The group named `name`, or None."""
    if db.get(Group, name) is None:
        return None
    return GroupInfo(name=name, members=tuple(group_members(db, name)))


def groups(db: DbSession) -> list[GroupInfo]:
    """Every group, by name."""
    names = db.execute(select(Group.name).order_by(Group.name)).scalars().all()
    return [GroupInfo(name=name, members=tuple(group_members(db, name))) for name in names]


def check_name(name: object, field: str = "name") -> str:
    """`name` if it is a valid person or group name; InvalidInput naming `field` otherwise."""
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InvalidInput(f"`{field}` must be 1 to 100 letters, digits, '.', '_' or '-', starting with a letter "
                           "or a digit", {"field": field})
    return name


def check_principal_id(principal_id: object, field: str) -> str:
    """`principal_id` if it can be a principal id; InvalidInput naming `field` otherwise."""
    if not isinstance(principal_id, str) or not principal_id or len(principal_id) > MAX_PRINCIPAL_ID \
            or any(char.isspace() for char in principal_id):
        raise InvalidInput(f"`{field}` must be a principal id (like slack:T1:U1 or twilio:+15551230001): 1 to "
                           f"{MAX_PRINCIPAL_ID} characters without spaces", {"field": field})
    if principal_id.startswith((PERSON, GROUP, *PLATFORM_GROUPS)):
        raise InvalidInput(f"`{field}` must be a principal id, not {principal_id}", {"field": field})
    return principal_id


def _unique(items: list[str], field: str) -> None:
    seen: set[str] = set()
    for index, item in enumerate(items):
        if item in seen:
            raise InvalidInput(f"`{field}[{index}]` lists {item} twice", {"field": f"{field}[{index}]"})
        seen.add(item)


def save_person(db: DbSession, name: str, display: str | None, principals: list[str], *,
                replace: bool = False) -> Person:
    """Create the person `name` (Conflict if there is one; with `replace`, replace theirs: NotFound if there is
    none) with these principals in this order. A principal already someone else's is a Conflict naming it."""
    check_name(name)
    if display is not None and (not display.strip() or len(display) > MAX_DISPLAY_NAME):
        raise InvalidInput(f"`displayName` must be 1 to {MAX_DISPLAY_NAME} characters", {"field": "displayName"})
    for index, principal_id in enumerate(principals):
        check_principal_id(principal_id, f"principals[{index}]")
    _unique(principals, "principals")
    row = db.get(PersonRow, name)
    if replace and row is None:
        raise NotFound(f"no person is named {name}", {"name": name})
    if not replace and row is not None:
        raise Conflict(f"a person is already named {name}", {"name": name})
    for principal_id in principals:
        owner = db.execute(_OWNER, {"principal": principal_id}).scalar()
        if owner is not None and owner != name:
            raise Conflict(f"{principal_id} is already {owner}'s", {"principal": principal_id, "person": owner})
    try:
        with db.begin_nested():  # a concurrent save that took a principal meanwhile: the same Conflict
            if row is None:
                db.add(PersonRow(name=name, display_name=display))
            else:
                row.display_name = display
                db.execute(delete(PersonPrincipal).where(PersonPrincipal.person == name))
            db.add_all(PersonPrincipal(principal_id=principal_id, person=name, position=position)
                       for position, principal_id in enumerate(principals))
            db.flush()
    except IntegrityError as exc:
        raise Conflict(f"{name} or one of these principals was saved meanwhile by someone else",
                       {"name": name, "principals": principals}) from exc
    return Person(name=name, display_name=display or name, principals=tuple(principals))


def delete_person(db: DbSession, name: str) -> list[str]:
    """Delete the person `name` and their links (their principals then count on their own again), and take them
    out of every group; returns those groups' names. NotFound if there is no such person."""
    row = db.get(PersonRow, name)
    if row is None:
        raise NotFound(f"no person is named {name}", {"name": name})
    member = PERSON + name
    left = list(db.execute(select(GroupMember.group).where(GroupMember.member == member)
                           .order_by(GroupMember.group)).scalars())
    db.execute(delete(GroupMember).where(GroupMember.member == member))
    db.execute(delete(PersonPrincipal).where(PersonPrincipal.person == name))
    db.delete(row)
    return left


def check_members(db: DbSession, members: Iterable[str]) -> list[str]:
    """The members if each is `person:<name>` of an existing person or a principal id; InvalidInput naming the
    first that is not (groups do not nest)."""
    checked = list(members)
    for index, member in enumerate(checked):
        field = f"members[{index}]"
        if isinstance(member, str) and member.startswith(PERSON):
            if db.get(PersonRow, member[len(PERSON):]) is None:
                raise InvalidInput(f"`{field}`: no person is named {member[len(PERSON):]}", {"field": field})
        else:
            check_principal_id(member, field)
    _unique(checked, "members")
    return checked


def save_group(db: DbSession, name: str, members: list[str], *, replace: bool = False) -> GroupInfo:
    """Create the group `name` (Conflict if there is one; with `replace`, replace its members: NotFound if there
    is none) with these members in this order."""
    check_name(name)
    check_members(db, members)
    row = db.get(Group, name)
    if replace and row is None:
        raise NotFound(f"no group is named {name}", {"name": name})
    if not replace and row is not None:
        raise Conflict(f"a group is already named {name}", {"name": name})
    try:
        with db.begin_nested():
            if row is None:
                db.add(Group(name=name))
            else:
                db.execute(delete(GroupMember).where(GroupMember.group == name))
            db.add_all(GroupMember(group=name, member=member, position=position)
                       for position, member in enumerate(members))
            db.flush()
    except IntegrityError as exc:  # created meanwhile by another save
        raise Conflict(f"the group {name} was saved meanwhile by someone else", {"name": name}) from exc
    return GroupInfo(name=name, members=tuple(members))


def delete_group(db: DbSession, name: str) -> None:
    """Delete the group `name` and its members. NotFound if there is no such group."""
    row = db.get(Group, name)
    if row is None:
        raise NotFound(f"no group is named {name}", {"name": name})
    db.execute(delete(GroupMember).where(GroupMember.group == name))
    db.delete(row)
