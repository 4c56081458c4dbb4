"""An editable request's input schema as a form: one field per top-level property, and typed values from the
text people give (Slack's edit modal, GitHub's `/approve amount=20`). Platform-free; the web console builds
the same form in JavaScript (gateway/console/static/js/edit.js).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any, Literal

from engine.answers.edits import Problem

Kind = Literal["string", "number", "integer", "boolean", "enum", "json"]
TRUE = frozenset({"true", "yes", "on", "1"})
FALSE = frozenset({"false", "no", "off", "0"})


@dataclass(frozen=True)
class FormField:
    """One top-level property of an input: its name, title, kind (an enum of strings offers its `options`;
    `json` is anything a single box cannot show: objects, lists, unions), whether it is required."""

    name: str
    title: str
    kind: Kind
    required: bool
    options: tuple[str, ...] = ()
    default: Any = None


def resolved(prop: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """The schema a property stands for: a `$ref` to the schema's `$defs` (or draft-07's `definitions`) looked up,
    a nullable one (`anyOf: [X, {"type": "null"}]`) as X."""
    ref = prop.get("$ref")
    for where in ("$defs", "definitions"):
        if isinstance(ref, str) and ref.startswith(f"#/{where}/"):
            return resolved(schema.get(where, {}).get(ref.removeprefix(f"#/{where}/"), {}), schema)
    others = [option for option in prop.get("anyOf", []) if option.get("type") != "null"]
    if len(others) == 1 and len(prop["anyOf"]) > 1:
        return resolved(others[0], schema)
    return prop


def kind_of(prop: dict[str, Any]) -> Kind:
    enum = prop.get("enum")
    if isinstance(enum, list) and enum and all(isinstance(value, str) for value in enum):
        return "enum"
    kind = prop.get("type")
    return kind if kind in ("string", "number", "integer", "boolean") else "json"


def form_fields(schema: dict[str, Any] | None) -> list[FormField]:
    """The fields of an input schema, in its order; none when it has no properties (the input is then edited
    as one JSON object)."""
    schema = schema or {}
    required = set(schema.get("required", []))
    fields = []
    for name, prop in (schema.get("properties") or {}).items():
        shape = resolved(prop, schema)
        kind = kind_of(shape)
        fields.append(FormField(name=name, title=str(prop.get("title") or shape.get("title") or name), kind=kind,
                                required=name in required,
                                options=tuple(shape["enum"]) if kind == "enum" else (),
                                default=prop.get("default", shape.get("default"))))
    return fields


def typed(field: FormField, text: str) -> Any:
    """The value `text` gives `field`, as its kind reads it; ValueError saying what was expected."""
    if field.kind == "string":
        return text
    value = text.strip()
    if field.kind == "enum":
        if value not in field.options:
            raise ValueError(f"expected one of {', '.join(field.options)}")
        return value
    if field.kind == "boolean":
        if value.lower() in TRUE | FALSE:
            return value.lower() in TRUE
        raise ValueError("expected true or false")
    if field.kind == "json":
        try:
            return json.loads(value)
        except ValueError as exc:
            raise ValueError(f"expected JSON ({exc})") from None
    try:
        return int(value)
    except ValueError:
        if field.kind == "integer":
            raise ValueError("expected a whole number") from None
    try:
        number = float(value)
    except ValueError:
        raise ValueError("expected a number") from None
    if not math.isfinite(number):
        raise ValueError("expected a finite number")
    return number


def edited(fields: list[FormField], proposed: dict[str, Any], given: dict[str, str | None]) \
        -> tuple[dict[str, Any], list[Problem]]:
    """The proposed input with each given field's text typed into it (None or blank: the field left out), and
    the problems of the texts that could not be typed."""
    by_name = {field.name: field for field in fields}
    result, problems = dict(proposed), []
    for name, text in given.items():
        field = by_name.get(name)
        if field is None:
            problems.append({"field": name, "problem": "the input has no such field"})
        elif text is None or (field.kind != "string" and not text.strip()):
            result.pop(name, None)
        else:
            try:
                result[name] = typed(field, text)
            except ValueError as exc:
                problems.append({"field": name, "problem": str(exc)})
    return result, problems
