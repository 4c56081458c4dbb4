"""Call inputs, and approvals that edit them (DESIGN.md section 10, "Edited approval").

A call runs with exactly the input that was approved (rule 10: `input_hash` is checked before it runs). An
editable approval may be approved with another input: it must fit what the request says it takes (an in-process
tool's input model, `model_problems`; an external request's JSON Schema, `schema_problems`); the call then runs
with it, and a `once()` grant covers that input only
(`input_grant`). The request keeps the input proposed (`action.input`), its response the input approved.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from decimal import Decimal
from typing import Any

from jsonschema import SchemaError, validators
from jsonschema import ValidationError as SchemaMismatch
from pydantic import BaseModel, ValidationError
from referencing.exceptions import Unresolvable

from engine.errors import InvalidInput

Problem = dict[str, str]
"""One way an input does not fit: `{"field": "amount", "problem": "Input should be a valid number"}`."""
Checker = Callable[[dict[str, Any]], list[Problem]]
"""What an edited input must fit, as a function listing its problems (none: it fits)."""

INPUT_GRANT = "#input:"
"""Joins an approval key and the digest of one input in the key of a grant that covers that input only."""
GRANT_DIGEST = 32
"""Hex characters of the input's digest in such a key (128 bits)."""
UNRESOLVED = "its inputSchema refers to what it does not hold"
"""The problem of an input checked against a schema with a `$ref` it cannot follow (nothing is fetched)."""
SHOWN_VALUE = 80
"""A changed value is cut to this many characters in the summary of an edit."""


def input_hash(data: dict[str, Any]) -> str:
    """The digest of a call's input as the database gives it back: PostgreSQL's JSONB keeps numbers as
    numerics, so a float Python writes with a positive exponent (`1e+16`) reads back as an integer and a
    negative zero as zero; each is hashed as it reads back (the input itself is kept as the model sent it)."""
    return hashlib.sha256(json.dumps(_as_read_back(data), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _as_read_back(value: Any) -> Any:
    if isinstance(value, float):
        if value == 0:
            return 0.0
        text = repr(value)
        return int(Decimal(text)) if "e+" in text else value
    if isinstance(value, dict):
        return {key: _as_read_back(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_read_back(item) for item in value]
    return value


# -- what an edit must fit -----------------------------------------------------------------------------


def problems_of(exc: ValidationError) -> list[Problem]:
    """pydantic's errors, each naming its field (`items.0.sku`; `input` for the input as a whole)."""
    return [{"field": ".".join(map(str, e["loc"])) or "input", "problem": e["msg"]}
            for e in exc.errors(include_url=False)]


def model_problems(model: type[BaseModel]) -> Checker:
    """The Checker of an in-process tool: its input model (the same check the call passes before it runs)."""
    def check(data: dict[str, Any]) -> list[Problem]:
        try:
            model.model_validate(data)
        except ValidationError as exc:
            return problems_of(exc)
        return []
    return check


def schema_problems(schema: dict[str, Any]) -> Checker:
    """The Checker of an external request: its `action.inputSchema`, by the draft its `$schema` names (2020-12 when
    none). Each problem names its field by its path (`items.0.sku`; a missing property by its own name); a schema
    that refers to what it does not hold (nothing is fetched) makes the input as a whole a problem."""
    validator = validators.validator_for(schema, default=validators.Draft202012Validator)(schema)

    def check(data: dict[str, Any]) -> list[Problem]:
        try:
            errors = sorted(validator.iter_errors(data), key=lambda e: [str(part) for part in e.absolute_path])
        except Unresolvable as exc:
            return [{"field": "input", "problem": f"{UNRESOLVED}: {exc}"}]
        return [{"field": field_of(error), "problem": error.message} for error in errors]
    return check


def field_of(error: SchemaMismatch) -> str:
    """The field a JSON Schema error is about: its path, with a missing required property named."""
    path = [str(part) for part in error.absolute_path]
    if error.validator == "required" and isinstance(error.validator_value, list):
        missing = next((str(name) for name in error.validator_value if error.message.startswith(repr(name))), None)
        path += [missing] if missing is not None else []
    return ".".join(path) or "input"


def schema_refused(schema: dict[str, Any], proposed: dict[str, Any]) -> str | None:
    """Why an external request's `inputSchema` cannot check its edits (not a JSON Schema, or it refers to what it
    does not hold, found checking the input it proposes); None when it can. The proposed input need not fit it
    (a model's call may not: people then fix it)."""
    if not isinstance(schema.get("$schema", ""), str):
        return "not a valid JSON Schema: its $schema is a URI naming a draft"
    try:
        validators.validator_for(schema, default=validators.Draft202012Validator).check_schema(schema)
    except SchemaError as exc:
        return f"not a valid JSON Schema: {exc.message}"
    unresolved = [p["problem"] for p in schema_problems(schema)(proposed) if p["problem"].startswith(UNRESOLVED)]
    return unresolved[0] if unresolved else None


def checked_edit(request_id: str, tool_name: str, data: dict[str, Any], check: Checker) -> dict[str, Any]:
    """`data` when it fits; else InvalidInput (a 422) naming each field that does not, in its message and in
    `details.fields`."""
    problems = check(data)
    if problems:
        listed = "; ".join(f"{p['field']}: {p['problem']}" for p in problems)
        raise InvalidInput(f"the edited input does not fit {tool_name}: {listed}",
                           {"requestId": request_id, "fields": problems})
    return data


# -- what an edit changed ------------------------------------------------------------------------------


def _canonical(value: Any) -> Any:
    """A value compared as JSON compares it: 20 and 20.0 are one number, True is not 1."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _canonical(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical(item) for item in value]
    return value


def _shown(value: Any) -> str:
    text = json.dumps(_canonical(value), ensure_ascii=False, sort_keys=True)
    return text if len(text) <= SHOWN_VALUE else text[: SHOWN_VALUE - 1] + "…"


def changes(proposed: dict[str, Any], approved: dict[str, Any]) -> str | None:
    """What an edit changed, field by field: `amount 200 -> 20, note (unset) -> "rush"`; None when nothing did."""
    parts = []
    for key in [*proposed, *(key for key in approved if key not in proposed)]:
        before = _shown(proposed[key]) if key in proposed else "(unset)"
        after = _shown(approved[key]) if key in approved else "(unset)"
        if before != after:
            parts.append(f"{key} {before} -> {after}")
    return ", ".join(parts) or None


def approved_with_changes(responder_name: str, summary: str) -> str:
    """The note the model reads with the result of an edited call (and channels show on a settled request)."""
    return f"Approved by {responder_name} with changes: {summary}"


# -- the once() grant of an edited approval ------------------------------------------------------------


def input_grant(approval_key: str, data: dict[str, Any]) -> str:
    """The key of a grant that covers calls with exactly this input (an edited approval's)."""
    return f"{approval_key}{INPUT_GRANT}{input_hash(data)[:GRANT_DIGEST]}"


def granted_key(grant: str) -> str:
    """The approval key a grant belongs to, whether it covers every input or one."""
    key, joined, _ = grant.rpartition(INPUT_GRANT)
    return key if joined else grant


# -- how a candidate stores its edit -------------------------------------------------------------------


def stored_text(text: str | None, data: dict[str, Any] | None) -> str | None:
    """A response candidate's `text` column: its note, or (an approve takes no note) its edited input as JSON."""
    return text if data is None else json.dumps(data, separators=(",", ":"))


def read_stored(decision: str | None, text: str | None) -> tuple[str | None, dict[str, Any] | None]:
    """(note, edited input) from a candidate's columns: an approve's text is its edited input."""
    if decision == "approve" and text is not None:
        return None, json.loads(text)
    return text, None
