"""The turn lifecycle's tables: a Session, its Turns and their Runs, the transcript (Message), the tool calls a
turn proposes (ToolCall), the approvals a person granted for the rest of a session by approval key (ApprovalGrant),
and the session's event log (Event)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    Boolean,
    ForeignKey,
    Index,
    Integer,
    SQLColumnExpression,
    String,
    Text,
    UniqueConstraint,
    false,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import Mapped, mapped_column

from engine.store.statuses import CallStatus, SessionStatus, TurnStatus
from engine.store.storage import (
    PRINCIPAL,
    DigestType,
    JSONType,
    KeylessJSON,
    ToolCallsJSON,
    digest_of,
    id_type,
    new_id,
    principal_id_of,
)
from engine.store.tables.base import Base, IdType, utcnow


class Session(Base):
    __tablename__ = "sessions"

    id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("ses"))
    agent: Mapped[str] = mapped_column(String(200))
    channel: Mapped[str] = mapped_column(String(32))
    stored_address: Mapped[str] = mapped_column("address", String(500))
    initiator: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    initiator_digest: Mapped[str | None] = mapped_column(DigestType, default=digest_of("initiator"))
    initiator_id: Mapped[str | None] = mapped_column(String(200), default=principal_id_of("initiator"))
    status: Mapped[str] = mapped_column(String(16), default=SessionStatus.IDLE)
    event_seq: Mapped[int] = mapped_column(Integer, default=0)
    message_seq: Mapped[int] = mapped_column(Integer, default=0)
    delivered_seq: Mapped[int] = mapped_column(Integer, default=0)
    delivery_lease_until: Mapped[datetime | None] = mapped_column()
    delivery_queued: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (
        Index("ix_sessions_channel_address", "channel", "address"),
        Index("ix_sessions_created_at_id", "created_at", "id"),  # the session list's order, newest first
        # the sessions a principal, or any principal of a person, started, newest first (engine/store/access.py;
        # on PostgreSQL, statistics on initiator_id's and initiator_digest's dependency: migration 0015)
        Index("ix_sessions_initiator_id_created_at", "initiator_id", "created_at", "id"),
    )

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
    status: Mapped[str] = mapped_column(String(16), default=TurnStatus.QUEUED)
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
    status: Mapped[str] = mapped_column(String(24), default=CallStatus.PROPOSED)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    approval_request_id: Mapped[str | None] = mapped_column(id_type(80))
    responder: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    verdict: Mapped[dict[str, Any] | None] = mapped_column(KeylessJSON(("decision", "reason")))
    stored_steps: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    interrupted: Mapped[int] = mapped_column(Integer, default=0)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)


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
