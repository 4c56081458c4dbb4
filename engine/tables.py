"""The database schema (DESIGN.md section 3): typed SQLAlchemy 2 tables, the same on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
import binascii
import contextlib
import secrets
from datetime import UTC, datetime
from typing import Any, cast

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    SQLColumnExpression,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
    false,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.types import TypeEngine

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


ID_PREFIXES = ("ses", "turn", "run", "call", "req", "cand")
"""What our ids start with; PostgreSQL stores an id by its prefix's number (`pack_id`)."""


def _base32(raw: bytes) -> str:
    return base64.b32encode(raw).decode().rstrip("=").lower()


def new_id(prefix: str) -> str:
    """`prefix_` and 128 random bits in 26 base32 characters."""
    return f"{prefix}_{_base32(secrets.token_bytes(16))}"


def pack_id(value: str) -> bytes:
    """An id as PostgreSQL stores it: one `new_id` made as its prefix's number and its 16 random bytes (17
    bytes instead of 31 characters, in every row and index entry that holds it); any other string as a zero
    byte and its UTF-8."""
    prefix, _, body = value.partition("_")
    if prefix in ID_PREFIXES and len(body) == 26:
        with contextlib.suppress(binascii.Error):
            raw = base64.b32decode(body.upper() + "======")
            if _base32(raw) == body:
                return bytes([ID_PREFIXES.index(prefix) + 1]) + raw
    return b"\x00" + value.encode()


def unpack_id(stored: bytes) -> str:
    if stored[0] == 0:
        return stored[1:].decode()
    return f"{ID_PREFIXES[stored[0] - 1]}_{_base32(stored[1:])}"


class PackedId(TypeDecorator[str]):
    """An id column on PostgreSQL: `bytea` holding `pack_id`; the application sees the id string."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> bytes | None:
        return None if value is None else pack_id(value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> str | None:
        return None if value is None else unpack_id(bytes(value))


class PackedDigest(TypeDecorator[str]):
    """A hex digest column on PostgreSQL: `bytea` holding its bytes (33 bytes for a SHA-256 instead of 65)."""

    impl = LargeBinary
    cache_ok = True

    def process_bind_param(self, value: str | None, dialect: Dialect) -> bytes | None:
        return None if value is None else bytes.fromhex(value)

    def process_result_value(self, value: bytes | None, dialect: Dialect) -> str | None:
        return None if value is None else bytes(value).hex()


DigestType = String(64).with_variant(PackedDigest(), "postgresql")
"""A SHA-256 in hex: varchar on SQLite, `PackedDigest` on PostgreSQL."""


def id_type(length: int = 64) -> TypeEngine[str]:
    """A string id: varchar on SQLite, `PackedId` on PostgreSQL."""
    return String(length).with_variant(PackedId(), "postgresql")


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
IdType = BigInteger().with_variant(Integer(), "sqlite")

class KeylessJSON(TypeDecorator[dict[str, Any]]):
    """A JSON object of known keys stored as the array of its values: in the small objects every parked turn
    stores (principals, a request's action) the keys take more bytes than the values. A last key whose value
    is empty is left off and reads back as `{}`. Objects stored as objects read as they were."""

    impl = JSONType
    cache_ok = True

    def __init__(self, keys: tuple[str, ...], optional: str | None = None) -> None:
        super().__init__()
        self.keys, self.optional = keys, optional  # both in the type's cache key (named like the arguments)

    def pack(self, value: dict[str, Any] | None) -> list[Any] | None:
        if value is None:
            return None
        stored = [value[key] for key in self.keys]
        return [*stored, value[self.optional]] if self.optional and value.get(self.optional) else stored

    def unpack(self, value: Any) -> dict[str, Any] | None:
        if not isinstance(value, list):
            return cast(dict[str, Any] | None, value)
        read = dict(zip(self.keys, value, strict=False))
        if self.optional:
            read[self.optional] = value[len(self.keys)] if len(value) > len(self.keys) else {}
        return read

    def process_bind_param(self, value: dict[str, Any] | None, dialect: Dialect) -> list[Any] | None:
        return self.pack(value)

    def process_result_value(self, value: Any, dialect: Dialect) -> dict[str, Any] | None:
        return self.unpack(value)


PRINCIPAL = KeylessJSON(("authenticator", "issuer", "principalType", "principalId"), optional="attributes")
"""A principal's wire form: about 45 bytes of JSONB instead of 125 with its keys."""


APPROVE = {"id": "approve", "label": "Approve", "style": "primary"}
CANCEL = {"id": "cancel", "label": "Cancel", "style": "danger"}
CONTINUE = {"id": "continue", "label": "Continue", "style": "primary"}
STOP = {"id": "stop", "label": "Stop", "style": "danger"}
BUILT_IN_OPTIONS = {option["id"]: option for option in (APPROVE, CANCEL, CONTINUE, STOP)}


class OptionsJSON(TypeDecorator[list[Any]]):
    """A request's options; a built-in one (Approve, Cancel...) is stored as its id: a tool approval's two
    options take about 30 bytes instead of 140. They read back as the built-in options are now."""

    impl = JSONType
    cache_ok = True

    def process_bind_param(self, value: list[Any] | None, dialect: Dialect) -> list[Any] | None:
        if value is None:
            return None
        return [o["id"] if BUILT_IN_OPTIONS.get(o["id"]) == o else o for o in value]

    def process_result_value(self, value: list[Any] | None, dialect: Dialect) -> list[Any] | None:
        if value is None:
            return None
        return [dict(BUILT_IN_OPTIONS[o]) if isinstance(o, str) else o for o in value]


class ToolCallsJSON(TypeDecorator[list[Any]]):
    """An assistant message's calls, in OpenAI's chat format, each stored as `[id, name, arguments]` (about
    50 bytes of JSONB instead of 130); a call of any other shape is stored as it is."""

    impl = JSONType
    cache_ok = True

    def process_bind_param(self, value: list[Any] | None, dialect: Dialect) -> list[Any] | None:
        if value is None:
            return None
        return [[c["id"], c["function"]["name"], c["function"]["arguments"]]
                if c.keys() == {"id", "type", "function"} and c["type"] == "function"
                and c["function"].keys() == {"name", "arguments"} else c for c in value]

    def process_result_value(self, value: list[Any] | None, dialect: Dialect) -> list[Any] | None:
        if value is None:
            return None
        return [{"id": c[0], "type": "function", "function": {"name": c[1], "arguments": c[2]}}
                if isinstance(c, list) else c for c in value]


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: UTCDateTime(), dict[str, Any]: JSONType, list[Any]: JSONType}


class Session(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("ses"))
    agent: Mapped[str] = mapped_column(String(200))
    channel: Mapped[str] = mapped_column(String(32))
    stored_address: Mapped[str] = mapped_column("address", String(500))
    initiator: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    status: Mapped[str] = mapped_column(String(16), default="idle")
    event_seq: Mapped[int] = mapped_column(Integer, default=0)
    message_seq: Mapped[int] = mapped_column(Integer, default=0)
    delivered_seq: Mapped[int] = mapped_column(Integer, default=0)
    delivery_lease_until: Mapped[datetime | None] = mapped_column()
    delivery_queued: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (Index("ix_sessions_channel_address", "channel", "address"),)

    @hybrid_property
    def address(self) -> str:
        """Where the session lives on its channel. A session opened without one (the REST API's) stores ""
        and reads as `<channel>:<session id>:`: nothing looks it up by that, so it costs no bytes."""
        return self.stored_address or f"{self.channel}:{self.id}:"

    @address.inplace.setter
    def _set_address(self, value: str) -> None:
        self.stored_address = value

    @address.inplace.expression
    @classmethod
    def _address_column(cls) -> SQLColumnExpression[str]:
        return cls.stored_address


class Turn(Base):
    __tablename__ = "turns"

    id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("turn"))
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    requested_by: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    input: Mapped[str] = mapped_column(Text)
    result: Mapped[str | None] = mapped_column(Text)
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    steps: Mapped[int] = mapped_column(Integer, default=0)
    step_budget: Mapped[int | None] = mapped_column(Integer)
    lease_until: Mapped[datetime | None] = mapped_column()
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        UniqueConstraint("session_id", "seq"),
        Index("ix_turns_status_updated_at", "status", "updated_at"),
    )


class Run(Base):
    __tablename__ = "runs"

    id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("run"))
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    seq: Mapped[int] = mapped_column(Integer)
    status: Mapped[str] = mapped_column(String(16))
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    ended_at: Mapped[datetime | None] = mapped_column()
    error: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    __table_args__ = (UniqueConstraint("turn_id", "seq"),)


class Message(Base):
    __tablename__ = "messages"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"))
    role: Mapped[str] = mapped_column(String(16))
    content: Mapped[str | None] = mapped_column(Text)
    tool_calls: Mapped[list[Any] | None] = mapped_column(ToolCallsJSON())
    tool_call_id: Mapped[str | None] = mapped_column(id_type())
    principal: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class ToolCall(Base):
    __tablename__ = "tool_calls"

    call_id: Mapped[str] = mapped_column(id_type(), primary_key=True)
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    position: Mapped[int] = mapped_column(Integer)
    tool: Mapped[str] = mapped_column(String(200))
    input: Mapped[dict[str, Any]] = mapped_column(JSONType)
    input_hash: Mapped[str] = mapped_column(DigestType)
    status: Mapped[str] = mapped_column(String(24), default="proposed")
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    approval_request_id: Mapped[str | None] = mapped_column(id_type(80))
    responder: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(KeylessJSON(("decision", "reason")))
    stored_steps: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    interrupted: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


class InputRequest(Base):
    __tablename__ = "input_requests"

    request_id: Mapped[str] = mapped_column(id_type(80), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    run_id: Mapped[str] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    call_id: Mapped[str | None] = mapped_column(id_type())
    position: Mapped[int] = mapped_column(Integer, default=0)
    kind: Mapped[str] = mapped_column(String(24))
    prompt: Mapped[str] = mapped_column(Text)
    action: Mapped[dict[str, Any] | None] = mapped_column(KeylessJSON(("kind", "callId", "toolName", "input")))
    options: Mapped[list[Any]] = mapped_column(OptionsJSON())
    allow_freeform: Mapped[bool] = mapped_column(Boolean, default=False)
    display: Mapped[str] = mapped_column(String(16))
    requested_by: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    outcome: Mapped[str | None] = mapped_column(String(16))
    response: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    responder: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column()
    resolved_at: Mapped[datetime | None] = mapped_column()

    __table_args__ = (
        Index("ix_input_requests_status_created_at", "status", "created_at"),
        Index("ix_input_requests_status_expires_at", "status", "expires_at"),
        Index("ix_input_requests_session_id_seq", "session_id", "seq"),
    )


class ResponseCandidate(Base):
    __tablename__ = "response_candidates"

    candidate_id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("cand"))
    request_id: Mapped[str] = mapped_column(
        ForeignKey("input_requests.request_id", ondelete="CASCADE"), index=True
    )
    responder: Mapped[dict[str, Any]] = mapped_column(PRINCIPAL)
    decision: Mapped[str | None] = mapped_column(String(200))
    text: Mapped[str | None] = mapped_column(Text)
    outcome: Mapped[str] = mapped_column(String(16), default="pending")
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    judged_at: Mapped[datetime | None] = mapped_column()


class ApprovalGrant(Base):
    __tablename__ = "approval_grants"

    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), index=True)
    approval_key: Mapped[str] = mapped_column(String(200))
    granted_by: Mapped[dict[str, Any]] = mapped_column(PRINCIPAL)
    request_id: Mapped[str] = mapped_column(id_type(80))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Event(Base):
    __tablename__ = "events"

    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    type: Mapped[str] = mapped_column(String(40))
    turn_id: Mapped[str | None] = mapped_column(id_type())
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    at: Mapped[datetime] = mapped_column(default=utcnow)


class Inbound(Base):
    __tablename__ = "inbound"

    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(32))
    external_id: Mapped[str] = mapped_column(String(200))
    received_at: Mapped[datetime] = mapped_column(default=utcnow)
    principal: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    payload_digest: Mapped[str] = mapped_column(DigestType)
    item: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    processed_at: Mapped[datetime | None] = mapped_column()
    duplicates: Mapped[int] = mapped_column(Integer, default=0, server_default="0")

    __table_args__ = (UniqueConstraint("channel", "external_id"),)


class Outbox(Base):
    __tablename__ = "outbox"

    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    job: Mapped[str] = mapped_column(String(64))
    args: Mapped[list[Any]] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    available_at: Mapped[datetime] = mapped_column(default=utcnow, index=True)


class Post(Base):
    """Something a channel posted for a session (a request's card, an assistant message), by a stable key,
    with the platform's reference (Slack ts, Twilio sid, GitHub comment id): a retried job never posts twice."""

    __tablename__ = "posts"

    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    key: Mapped[str] = mapped_column(String(200))
    channel: Mapped[str] = mapped_column(String(32))
    ref: Mapped[str | None] = mapped_column(String(200))
    data: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("session_id", "key"),)


class Contact(Base):
    """A channel address's reachability (an SMS number that said STOP is `unreachable`)."""

    __tablename__ = "contacts"

    id: Mapped[int] = mapped_column(IdType, primary_key=True, autoincrement=True)
    channel: Mapped[str] = mapped_column(String(32))
    address: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default="reachable")
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("channel", "address"),)
