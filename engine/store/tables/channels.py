"""The tables at the channels' edge: what they deliver (Inbound, with PrunedInbound's counts of pruned rows),
the jobs owed once a transaction commits (Outbox), what a channel posted (Post), and whether an address can be
reached (Contact)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import BigInteger, ForeignKey, Index, Integer, String, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from engine.store.statuses import ContactStatus
from engine.store.storage import PRINCIPAL, DigestType, JSONType
from engine.store.tables.base import Base, IdType, utcnow


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

    __table_args__ = (
        UniqueConstraint("channel", "external_id"),
        Index("ix_inbound_received_at", "received_at"),  # the oldest rows, for pruning
    )


UNPROCESSED = Inbound.processed_at.is_(None) & Inbound.item.is_not(None)
"""An inbound item not applied yet (its job has not run yet, or died): a few rows, for the seconds a job takes."""
# the items not applied yet, for sweep(): only those rows are in it, so finding them costs nothing however many
# deliveries are kept
Index("ix_inbound_unprocessed_received_at", Inbound.received_at, postgresql_where=UNPROCESSED,
      sqlite_where=UNPROCESSED)


class PrunedInbound(Base):
    """The inbound rows pruned so far, per channel: how many deliveries and duplicates they counted. The webhook
    counters of /metrics add these to the rows still kept, so pruning never makes a counter go down."""

    __tablename__ = "pruned_inbound"

    channel: Mapped[str] = mapped_column(String(32), primary_key=True)
    deliveries: Mapped[int] = mapped_column(BigInteger, default=0)
    duplicates: Mapped[int] = mapped_column(BigInteger, default=0)


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
    status: Mapped[str] = mapped_column(String(16), default=ContactStatus.REACHABLE)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow)

    __table_args__ = (UniqueConstraint("channel", "address"),)
