"""What the REST API's wire shapes share: optional fields (`Omittable`, `omitted`), the integers and page sizes a
query takes, and the documents that belong to no resource (who the caller is, an error, the health check)."""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from engine.protocol import Principal, Role, WireModel

MAX_QUERY_INT = 2**31 - 1
"""The largest integer a query parameter (`limit`, `after`) takes: every database stores it."""

Text = Annotated[str, Field(min_length=1)]


class _NullHidden:
    """`X | None` validated as pydantic's nullable X, so an error names the field (not `field.none` beside
    `field.<X's tag>`, as for a union), and shown as X alone in the JSON Schema."""

    def __get_pydantic_json_schema__(self, schema: CoreSchema, handler: GetJsonSchemaHandler) -> JsonSchemaValue:
        return handler(schema["schema"] if schema["type"] == "nullable" else schema)


T = TypeVar("T")
Omittable = Annotated[T | None, _NullHidden()]
"""A field a client may leave out (or send as `null`): with `omitted()` as its default."""


def omitted(description: str | None = None, **field: Any) -> Any:
    """The default of a field a client may leave out, and that is never `null` in its JSON Schema."""
    return Field(None, description=description, json_schema_extra=lambda schema: schema.pop("default", None),
                 **field)


QueryInt = Annotated[int, Field(ge=0, le=MAX_QUERY_INT)]
PAGE = 100
"""Sessions or requests per page of a list, unless the client asks for another `limit`."""
MAX_PAGE = 500
"""The largest `limit` a list takes (the API's and the CLI's): a page is read, and answered, whole."""
PageLimit = Annotated[int, Field(ge=0, le=MAX_PAGE)]


def query_int(raw: str) -> int | None:
    """`raw` as a QueryInt (digits only: no sign, no spaces), or None when it is not one."""
    return int(raw) if raw.isascii() and raw.isdigit() and int(raw) <= MAX_QUERY_INT else None


def page_limit(raw: str) -> int | None:
    """`raw` as a PageLimit, or None when it is not one."""
    value = query_int(raw)
    return value if value is not None and value <= MAX_PAGE else None


TITLE = "the session's first message on one line, cut to 80 characters with an ellipsis; null before its first"


# -- documents of no resource ------------------------------------------------------------------------


class Me(WireModel):
    """Who the caller acts as, and what its key may do (docs/access.md)."""

    principal: Principal
    role: Role


class ErrorDetail(WireModel):
    code: str
    message: str
    details: Any = None


class Error(WireModel):
    error: ErrorDetail


class Health(WireModel):
    status: Literal["ok", "degraded"]
    checks: dict[str, str] = Field(description="`ok` or `error: <kind>` for the database and Redis")
