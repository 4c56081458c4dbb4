"""How column values are stored: ids and digests packed on PostgreSQL, aware UTC datetimes, and the small
JSON every parked turn repeats kept without its keys. The application always sees the values whole."""

from __future__ import annotations

import base64
import binascii
import contextlib
import functools
import hashlib
import secrets
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import JSON, DateTime, LargeBinary, String, TypeDecorator
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect, default
from sqlalchemy.types import TypeEngine

from engine.answers.options import BUILT_IN_OPTIONS

ID_PREFIXES = ("ses", "turn", "run", "call", "req", "cand")
"""What our ids start with; PostgreSQL stores an id by its prefix's number (`pack_id`)."""


def _base32(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=").lower()


def new_id(prefix: str) -> str:
    """`prefix_` and 128 random bits in 26 base32 characters."""
    return f"{prefix}_{_base32(secrets.token_bytes(16))}"


@functools.lru_cache(maxsize=1024)
def pack_id(value: str) -> bytes:
    """An id as PostgreSQL stores it: one `new_id` made as its prefix's number and its 16 random bytes (17
    bytes instead of 31 characters, in every row and index entry that holds it); any other string as a zero
    byte and its UTF-8. Cached: a transaction binds its session's and turn's ids in most statements, and
    base32 decoding is pure Python (about 7 us a call, over a hundred calls per park/resume cycle)."""
    prefix, _, body = value.partition("_")
    if prefix in ID_PREFIXES and len(body) == 26:
        with contextlib.suppress(binascii.Error):
            raw = base64.b32decode(body.upper() + "======")
            if _base32(raw) == body:
                return bytes([ID_PREFIXES.index(prefix) + 1]) + raw
    return b"\x00" + value.encode()


@functools.lru_cache(maxsize=1024)
def unpack_id(stored: bytes) -> str:
    if stored[0] == 0:
        return stored[1:].decode()
    return f"{ID_PREFIXES[stored[0] - 1]}_{_base32(stored[1:])}"


class Codec(TypeDecorator[Any]):
    """A column type that stores a value in another form (`pack`) and reads it back (`unpack`); NULL stays
    NULL. Subclasses set `impl`, and `cache_ok` (SQLAlchemy reads it from each class itself)."""

    def pack(self, value: Any) -> Any:
        raise NotImplementedError

    def unpack(self, stored: Any) -> Any:
        raise NotImplementedError

    def process_bind_param(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else self.pack(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> Any:
        return None if value is None else self.unpack(value)


class PackedId(Codec):
    """An id column on PostgreSQL: `bytea` holding `pack_id`."""

    impl = LargeBinary
    cache_ok = True

    def pack(self, value: str) -> bytes:
        return pack_id(value)

    def unpack(self, stored: bytes) -> str:
        return unpack_id(bytes(stored))


class PackedDigest(Codec):
    """A hex digest column on PostgreSQL: `bytea` holding its bytes (33 bytes for a SHA-256 instead of 65)."""

    impl = LargeBinary
    cache_ok = True

    def pack(self, value: str) -> bytes:
        return bytes.fromhex(value)

    def unpack(self, stored: bytes) -> str:
        return bytes(stored).hex()


def id_type(length: int = 64) -> TypeEngine[str]:
    """A string id: varchar on SQLite, `PackedId` on PostgreSQL."""
    return String(length).with_variant(PackedId(), "postgresql")


DigestType = String(64).with_variant(PackedDigest(), "postgresql")
"""A SHA-256 in hex: varchar on SQLite, `PackedDigest` on PostgreSQL."""


class UTCDateTime(TypeDecorator[datetime]):
    """Aware UTC datetimes on both databases (SQLite hands back naive ones)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


JSONType = JSON(none_as_null=True).with_variant(JSONB(none_as_null=True), "postgresql")
"""JSON on SQLite, JSONB on PostgreSQL; Python None is SQL NULL (so `IS NULL` means \"no value\")."""


class KeylessJSON(Codec):
    """A JSON object of known keys stored as the array of its values: in the small objects every parked turn
    stores (principals, a request's action, a call's verdict) the keys take more bytes than the values. A
    last, `optional` key whose value is empty is left off and reads back as `{}`. An object with keys beyond
    these (an editable approval's action) is stored as an object, and objects stored as objects read as they
    were."""

    impl = JSONType
    cache_ok = True

    def __init__(self, keys: tuple[str, ...], optional: str | None = None) -> None:
        super().__init__()
        self.keys, self.optional = keys, optional  # both in the type's cache key (named like the arguments)

    def pack(self, value: dict[str, Any]) -> Any:
        if not value.keys() <= {*self.keys, self.optional}:
            return value
        stored = [value[key] for key in self.keys]
        return [*stored, value[self.optional]] if self.optional and value.get(self.optional) else stored

    def unpack(self, stored: Any) -> Any:
        if not isinstance(stored, list):
            return stored
        read = dict(zip(self.keys, stored, strict=False))
        if self.optional:
            read[self.optional] = stored[len(self.keys)] if len(stored) > len(self.keys) else {}
        return read


IDENTITY = ("authenticator", "issuer", "principalType", "principalId")
"""The fields of a principal's wire form that say who it is (Principal.identity); the rest are attributes."""

PRINCIPAL = KeylessJSON(IDENTITY, optional="attributes")
"""A principal's wire form: about 45 bytes of JSONB instead of 125 with its keys."""


def principal_digest(wire: dict[str, Any] | None) -> str | None:
    """The SHA-256 (hex) of a principal's identity, None for no principal: a short, indexed column stands for
    the JSON one beside it, so "the sessions alice started" is an index lookup (engine/store/access.py). Its four
    fields are joined by the ASCII unit separator (U+001F), which no authenticator puts in them (API keys'
    principal ids may hold no control character), so migration 0007 computes the same in SQL."""
    if wire is None:
        return None
    return hashlib.sha256("\x1f".join(str(wire[key]) for key in IDENTITY).encode()).hexdigest()


def digest_of(column: str) -> Callable[[default.DefaultExecutionContext], str | None]:
    """A column default: the `principal_digest` of the principal inserted in `column` of the same row, so
    every insert (the engine's statements, the ORM's, a test's) keeps the two together."""
    def computed(context: default.DefaultExecutionContext) -> str | None:
        return principal_digest(context.get_current_parameters().get(column))
    return computed


def principal_id_of(column: str) -> Callable[[default.DefaultExecutionContext], str | None]:
    """A column default: the principal id of the principal inserted in `column` of the same row (None for none),
    indexed where a person's principals are looked for by id (engine/store/access.py): a person links principal
    ids, and an identity's digest cannot be made from its id alone."""
    def computed(context: default.DefaultExecutionContext) -> str | None:
        wire = context.get_current_parameters().get(column)
        return None if wire is None else str(wire["principalId"])
    return computed


STORED_AS = {option["id"]: token for token, option in BUILT_IN_OPTIONS.items()}
"""The token each built-in option (engine/answers/options.py) is stored as."""


class OptionsJSON(Codec):
    """A request's options; a built-in one (Approve, Deny...) is stored as its token: a tool approval's two
    options take about 30 bytes instead of 140. They read back as the built-in options are now."""

    impl = JSONType
    cache_ok = True

    def pack(self, value: list[dict[str, Any]]) -> list[Any]:
        return [token if (token := STORED_AS.get(o["id"])) and BUILT_IN_OPTIONS[token] == o else o for o in value]

    def unpack(self, stored: list[Any]) -> list[dict[str, Any]]:
        return [dict(BUILT_IN_OPTIONS[o]) if isinstance(o, str) else o for o in stored]


class ToolCallsJSON(Codec):
    """An assistant message's calls, in OpenAI's chat format, each stored as `[id, name, arguments]` (about
    50 bytes of JSONB instead of 130); a call of any other shape is stored as it is."""

    impl = JSONType
    cache_ok = True

    def pack(self, value: list[dict[str, Any]]) -> list[Any]:
        return [[c["id"], c["function"]["name"], c["function"]["arguments"]]
                if c.keys() == {"id", "type", "function"} and c["type"] == "function"
                and c["function"].keys() == {"name", "arguments"} else c for c in value]

    def unpack(self, stored: list[Any]) -> list[dict[str, Any]]:
        return [{"id": c[0], "type": "function", "function": {"name": c[1], "arguments": c[2]}}
                if isinstance(c, list) else c for c in stored]
