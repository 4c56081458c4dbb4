"""`/api/people` and `/api/groups` (docs/right-people.md): who stands behind the principals, for operators only.

A key of another role gets 404 on every route, as for anything it may not see (docs/access.md). Bodies that do
not fit, and names, principal ids or members that cannot be, are a 422 naming the field; a principal already
someone else's is a 409 naming it. Nothing is stored then.
"""

from __future__ import annotations

from typing import Any, TypeVar

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, Field, ValidationError

from engine import people
from engine.errors import NotFound
from engine.protocol import StrictWireModel, WireModel

from .api import body, runtime
from .auth import current_caller
from .errors import ApiError, field_problems
from .external import unprocessable

bp = Blueprint("people", __name__, url_prefix="/api")
M = TypeVar("M", bound=BaseModel)

MAX_PRINCIPALS = 50
MAX_MEMBERS = 1000
NAME = "1 to 100 letters, digits, '.', '_' or '-', starting with a letter or a digit"
PRINCIPAL_IDS = "principal ids (`slack:T1:U1`, `twilio:+15551230001`, `github:1001`, an API key's), in order: the " \
                "first is where a direct message to the person goes first; each at most one person's"


class PersonUpdate(StrictWireModel):
    """`PUT /api/people/<name>`: the person's display name and principals, replaced whole."""

    name: str | None = Field(None, description="the path's, if given (a person is not renamed)")
    display_name: str | None = Field(None, description="how messages name them (\"Alice Ng\"); their name if none")
    principals: list[str] = Field(max_length=MAX_PRINCIPALS, description=PRINCIPAL_IDS)


class NewPerson(PersonUpdate):
    """`POST /api/people`."""

    name: str = Field(description=NAME)


class PersonOut(WireModel):
    name: str
    display_name: str = Field(description="their name when none was given")
    principals: list[str]


class PersonList(WireModel):
    people: list[PersonOut] = Field(description="by name")


class PersonDeleted(WireModel):
    deleted: str
    left_groups: list[str] = Field(description="the groups they were a member of, and no longer are")


class GroupUpdate(StrictWireModel):
    """`PUT /api/groups/<name>`: the group's members, replaced whole."""

    name: str | None = Field(None, description="the path's, if given (a group is not renamed)")
    members: list[str] = Field(max_length=MAX_MEMBERS, description="`person:<name>` of an existing person, or "
                                                                   "principal ids (groups do not nest)")


class NewGroup(GroupUpdate):
    """`POST /api/groups`."""

    name: str = Field(description=NAME)


class GroupOut(WireModel):
    name: str
    members: list[str]


class GroupList(WireModel):
    groups: list[GroupOut] = Field(description="by name")


class GroupDeleted(WireModel):
    deleted: str


def operator_only() -> None:
    """404, as for a route that is not there, unless the caller is an operator."""
    caller = current_caller()
    if caller.role != "operator":
        raise ApiError(404, "not_found", "the requested URL was not found on the server")


def parsed(model: type[M], data: dict[str, Any]) -> M:
    """The body as `model`; 422 naming each field that does not fit."""
    try:
        return model.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise unprocessable(field_problems(exc), "invalid_body") from None


def same_name(given: str | None, name: str) -> None:
    if given is not None and given != name:
        raise ApiError(422, "invalid_input", f"`name` is the path's ({name}): a {given} is not renamed",
                       {"field": "name"})


@bp.post("/people")
def create_person() -> tuple[Response, int]:
    operator_only()
    new = parsed(NewPerson, body())
    with runtime().transaction() as db:
        person = people.save_person(db, new.name, new.display_name, new.principals)
    return jsonify(person.wire()), 201


@bp.get("/people")
def list_people() -> Response:
    operator_only()
    with runtime().db.read() as db:
        return jsonify({"people": [person.wire() for person in people.people(db)]})


@bp.get("/people/<name>")
def get_person(name: str) -> Response:
    operator_only()
    with runtime().db.read() as db:
        person = people.person(db, name)
    if person is None:
        raise NotFound(f"no person is named {name}", {"name": name})
    return jsonify(person.wire())


@bp.put("/people/<name>")
def replace_person(name: str) -> Response:
    operator_only()
    update = parsed(PersonUpdate, body())
    same_name(update.name, name)
    with runtime().transaction() as db:
        person = people.save_person(db, name, update.display_name, update.principals, replace=True)
    return jsonify(person.wire())


@bp.delete("/people/<name>")
def delete_person(name: str) -> Response:
    operator_only()
    with runtime().transaction() as db:
        left = people.delete_person(db, name)
    return jsonify({"deleted": name, "leftGroups": left})


@bp.post("/groups")
def create_group() -> tuple[Response, int]:
    operator_only()
    new = parsed(NewGroup, body())
    with runtime().transaction() as db:
        group = people.save_group(db, new.name, new.members)
    return jsonify(group.wire()), 201


@bp.get("/groups")
def list_groups() -> Response:
    operator_only()
    with runtime().db.read() as db:
        return jsonify({"groups": [group.wire() for group in people.groups(db)]})


@bp.get("/groups/<name>")
def get_group(name: str) -> Response:
    operator_only()
    with runtime().db.read() as db:
        group = people.group(db, name)
    if group is None:
        raise NotFound(f"no group is named {name}", {"name": name})
    return jsonify(group.wire())


@bp.put("/groups/<name>")
def replace_group(name: str) -> Response:
    operator_only()
    update = parsed(GroupUpdate, body())
    same_name(update.name, name)
    with runtime().transaction() as db:
        group = people.save_group(db, name, update.members, replace=True)
    return jsonify(group.wire())


@bp.delete("/groups/<name>")
def delete_group(name: str) -> Response:
    operator_only()
    with runtime().transaction() as db:
        people.delete_group(db, name)
    return jsonify({"deleted": name})
