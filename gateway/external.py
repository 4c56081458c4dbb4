"""`POST /api/requests`'s body, checked: what the JSON Schema cannot say (which fields go with which kind, unique
options, a configured place) is a 422 naming the field, as a shape error is, and nothing is stored."""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from engine.answers.edits import schema_refused
from engine.answers.external import NewRequest, Place
from engine.answers.schedules import ON_TIMEOUT, Schedule, schedule
from engine.jobs.runtime import Runtime

from .errors import ApiError, field_problems
from .schemas import MAX_METADATA_BYTES, MAX_SCHEMA_BYTES, PlaceSpec
from .schemas import NewRequest as NewRequestBody


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
    problems = kind_problems(body) + time_problems(body)
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
        allow_freeform=bool(body.allow_freeform), approvers=body.approvers or [], expires_in=body.expires_in,
        place=Place(*place(rt, body.to.channel, body.to.address, "to.")) if body.to else None,
        idempotency_key=body.idempotency_key, callback_url=body.callback_url, metadata=body.metadata,
        schedule=schedule_of(rt, body),
    )


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
