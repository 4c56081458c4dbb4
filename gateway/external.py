"""`POST /api/requests`'s body, checked: what the JSON Schema cannot say (which fields go with which kind, unique
options, a configured place, a known person or group that a channel can write to) is a 422 naming the field, as a
shape error is, and nothing is stored."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import ValidationError

from engine.answers.edits import schema_refused
from engine.answers.external import NewRequest, Place
from engine.answers.places import place_targets
from engine.answers.schedules import ON_TIMEOUT, Schedule, schedule
from engine.answers.showing import GroupPlace, PersonPlace, showing
from engine.jobs.runtime import Runtime
from engine.people import NAME, group, person

from .errors import ApiError, field_problems
from .schemas import MAX_METADATA_BYTES, MAX_SCHEMA_BYTES, PlaceSpec
from .schemas import NewRequest as NewRequestBody

APPROVER_FORMS = {
    "person": (NAME, "a person's name"), "group": (NAME, "a group's name"),
    "slack-usergroup": (re.compile(r"(?:[A-Z0-9]{1,32}:)?[A-Z0-9]{1,32}"), "a Slack user group id (S0614TZR7), "
                        "or a workspace id and one (T1:S0614TZR7)"),
    "github-team": (re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}"), "<org>/<team slug>"),
}
"""The approvers items that are not principal ids: their forms, and what each says."""
MANY = ("group:", "slack-usergroup:", "github-team:")
"""Items that may name many people."""


def unprocessable(problems: list[tuple[str, str]], code: str = "invalid_request") -> ApiError:
    """422 naming each field and its problem (the first in the message)."""
    field, problem = problems[0]
    return ApiError(422, code, f"{field}: {problem}" if field else problem,
                    [{"field": name, "problem": why} for name, why in problems])


def parse_new_request(rt: Runtime, data: dict[str, Any]) -> NewRequest:
    """The engine's NewRequest for a body; ApiError 422 naming what does not fit."""
    try:
        body = NewRequestBody.model_validate(data, by_alias=True, by_name=False)
    except ValidationError as exc:
        raise unprocessable(field_problems(exc)) from None
    problems = kind_problems(body) + time_problems(body) + approver_problems(body)
    if body.metadata is not None and len(json.dumps(body.metadata)) > MAX_METADATA_BYTES:
        problems.append(("metadata", f"at most {MAX_METADATA_BYTES} bytes of JSON"))
    if problems:
        raise unprocessable(problems)
    options = [{"id": o.id or o.label, "label": o.label, **({"description": o.description} if o.description else {})}
               for o in body.options or []]
    return NewRequest(
        kind=body.kind, prompt=body.prompt, tool_name=body.action.tool_name if body.action else None,
        tool_input=body.action.input if body.action else None, editable=bool(body.editable),
        input_schema=body.action.input_schema if body.action else None, options=options,
        allow_freeform=bool(body.allow_freeform), approvers=body.approvers or [], quorum=body.quorum or 1,
        expires_in=body.expires_in,
        idempotency_key=body.idempotency_key, callback_url=body.callback_url, metadata=body.metadata,
        schedule=schedule_of(rt, body), **places_of(rt, body),
    )


def places_of(rt: Runtime, body: NewRequestBody) -> dict[str, Any]:
    """`to` as the request's `place` (its first channel address: the session it joins) and where else it is
    `shown`; each checked (422 naming `to.` or `to.<n>.` and the field): one kind of place, a configured channel's
    address, a known person or group."""
    listed = isinstance(body.to, list)
    specs = body.to if isinstance(body.to, list) else [body.to] if body.to is not None else []
    session_place: Place | None = None
    others: list[dict[str, Any]] = []
    for n, spec in enumerate(specs):
        prefix = f"to.{n}." if listed else "to."
        kinds = [kind for kind in ("person", "group") if getattr(spec, kind) is not None]
        if spec.channel is not None or spec.address is not None:
            kinds.append("channel")
        if len(kinds) != 1:
            raise unprocessable([(prefix.rstrip("."), 'a place is {"channel", "address"}, {"person"} or {"group"}')])
        if kinds == ["channel"]:
            missing = [name for name in ("channel", "address") if getattr(spec, name) is None]
            if missing:
                raise unprocessable([(prefix + missing[0], "Field required")])
            assert spec.channel is not None and spec.address is not None
            checked = Place(*place(rt, spec.channel, spec.address, prefix))
            if session_place is None:
                session_place = checked
            else:
                others.append({"channel": spec.channel, "address": spec.address})
            continue
        kind = kinds[0]
        name = str(spec.person if kind == "person" else spec.group)
        not_shown: list[dict[str, Any]] = []
        with rt.db.read() as db:
            if (person if kind == "person" else group)(db, name) is None:
                raise ApiError(422, f"unknown_{kind}", f"no {kind} {name!r}", {"field": prefix + kind})
            place_targets(rt, db, None, PersonPlace(name) if kind == "person" else GroupPlace(name), not_shown)
        if not_shown:  # nobody to show it to there: an in-process agent's request would open without it
            why = not_shown[0]["reason"]
            raise ApiError(422, "unreachable_person", why if kind == "person" else f"group {name!r}: {why}",
                           {"field": prefix + kind})
        others.append({kind: name})
    return {"place": session_place, "shown": showing(others)}


def kind_problems(body: NewRequestBody) -> list[tuple[str, str]]:
    """What a tool approval or a question may not have, or must."""
    if body.kind == "tool-approval":
        problems = [] if body.action else [("action", "a tool approval needs its action: {toolName, input}")]
        problems += [(name, "only a question has it") for name, value in (
            ("options", body.options), ("allowFreeform", body.allow_freeform)) if value is not None]
        return problems + input_schema_problems(body)
    problems = [] if body.prompt else [("prompt", "a question needs its prompt")]
    problems += [(name, "only a tool approval has it") for name, value in (
        ("action", body.action), ("editable", body.editable)) if value is not None]
    for what in ("id", "label"):
        seen = [str(getattr(o, what) or o.label).strip().lower() for o in body.options or []]
        if len(set(seen)) < len(seen):
            problems.append(("options", f"two options have the same {what} (compared without case)"))
    return problems


def approver_problems(body: NewRequestBody) -> list[tuple[str, str]]:
    """Approvers items of no known form, a quorum that cannot be met (more people than the approvers name, when
    none of them is a group), and a quorum on an editable approval."""
    named = list(dict.fromkeys(body.approvers or []))
    problems = [(f"approvers.{n}", problem) for n, item in enumerate(body.approvers or [])
                if (problem := approver_problem(item)) is not None]
    quorum = body.quorum or 1
    if quorum > 1 and body.kind != "tool-approval":
        problems.append(("quorum", "only a tool approval takes a quorum: a question settles at its first answer"))
    elif quorum > 1 and body.editable:
        problems.append(("editable", "an approval several people give is approved as proposed: an edit would run "
                                     "on one person's word"))
    elif named and quorum > len(named) and not any(item.startswith(MANY) for item in named):
        problems.append(("quorum", f"{quorum} people cannot approve it: its approvers name {len(named)}"))
    return problems


def approver_problem(item: str) -> str | None:
    """What is wrong with one approvers item (None: nothing)."""
    kind, sep, rest = item.partition(":")
    form = APPROVER_FORMS.get(kind) if sep else None
    if form is not None:
        return None if form[0].fullmatch(rest) else f"{kind}: is followed by {form[1]}"
    if any(char.isspace() for char in item):
        return "a principal id has no spaces"
    return None


def input_schema_problems(body: NewRequestBody) -> list[tuple[str, str]]:
    """An input schema goes with `editable: true`, and must be a JSON Schema that can check edits (and is stored
    with the request: at most MAX_SCHEMA_BYTES of JSON)."""
    schema = body.action.input_schema if body.action else None
    if schema is None:
        return []
    if not body.editable:
        return [("action.inputSchema", "only an editable approval has it (add \"editable\": true)")]
    if len(json.dumps(schema)) > MAX_SCHEMA_BYTES:
        return [("action.inputSchema", f"at most {MAX_SCHEMA_BYTES} bytes of JSON")]
    assert body.action is not None
    refused = schema_refused(schema, body.action.input)
    return [("action.inputSchema", refused)] if refused else []


def time_problems(body: NewRequestBody) -> list[tuple[str, str]]:
    """What onTimeout and escalate may not be (the rest of their shape is the schema's)."""
    problems = []
    allowed = ON_TIMEOUT[body.kind]
    if body.on_timeout is not None and body.on_timeout not in allowed:
        problems.append(("onTimeout", f"a {body.kind}'s is {' or '.join(allowed)}"))
    if body.on_timeout == "approve" and body.expires_in is None:
        problems.append(("onTimeout", "approve happens on expiry: it needs expiresIn"))
    if body.escalate is not None and body.escalate.to is None and body.escalate.approvers is None:
        problems.append(("escalate", "an escalation needs `to` (places), `approvers`, or both"))
    return problems


def schedule_of(rt: Runtime, body: NewRequestBody) -> Schedule:
    """The request's reminders, escalation and on_timeout; each escalation place is checked as `to` is (422)."""
    remind, escalate = body.remind, body.escalate
    to = escalate.to if escalate is not None else None
    places = [to] if isinstance(to, PlaceSpec) else to or []
    for n, spec in enumerate(places):
        place(rt, spec.channel, spec.address, f"escalate.to.{n}.")
    return schedule(
        body.kind, remind_every=remind.every if remind else None, remind_max=remind.max if remind else None,
        escalate_after=escalate.after if escalate else None,
        escalate_to=[{"channel": spec.channel, "address": spec.address} for spec in places],
        escalate_approvers=escalate.approvers if escalate else None, on_timeout=body.on_timeout)


def place(rt: Runtime, channel: str, address: dict[str, Any], prefix: str = "") -> tuple[str, str]:
    """A configured channel and the session address its adapter makes of an API-given one; 422 otherwise."""
    adapter = rt.channels.get(channel)
    if adapter is None:
        raise ApiError(422, "unknown_channel", f"channel {channel!r} is not configured",
                       {"field": f"{prefix}channel", "channels": sorted(rt.channels)})
    try:
        return channel, adapter.address(address)
    except ValueError as exc:
        raise ApiError(422, "invalid_address", str(exc), {"field": f"{prefix}address", "channel": channel}) from exc
