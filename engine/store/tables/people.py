"""The tables of people and groups (engine/people.py): who uses which principals, and named sets of them."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from engine.store.tables.base import Base, utcnow


class Person(Base):
    """Someone who uses several principals (engine/people.py): a name, how to call them, their principals."""

    __tablename__ = "people"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    display_name: Mapped[str | None] = mapped_column(String(200))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class PersonPrincipal(Base):
    """A principal id a person uses, in the order given (`position`: their first linked channel first). The
    principal id is the key: it belongs to at most one person."""

    __tablename__ = "person_principals"

    principal_id: Mapped[str] = mapped_column(String(200), primary_key=True)
    person: Mapped[str] = mapped_column(ForeignKey("people.name", ondelete="CASCADE"), index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class Group(Base):
    """A named set of people and principal ids (engine/people.py), for `approvers("group:<name>")`."""

    __tablename__ = "groups"

    name: Mapped[str] = mapped_column(String(100), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class GroupMember(Base):
    """A member of a group as stored: `person:<name>` or a principal id, in the order given."""

    __tablename__ = "group_members"

    group: Mapped[str] = mapped_column(ForeignKey("groups.name", ondelete="CASCADE"), primary_key=True)
    member: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
    position: Mapped[int] = mapped_column(Integer, default=0)


class PlatformGroup(Base):
    """A platform group (`slack-usergroup:<id>`, `github-team:<org>/<slug>`) whose members were last looked up at
    `fetched_at` (engine/channels/groups.py): every process judges with that answer for a while, and the request
    lists show its members what the group may approve. A lookup that failed is never stored."""

    __tablename__ = "platform_groups"

    item: Mapped[str] = mapped_column(String(200), primary_key=True)
    fetched_at: Mapped[datetime] = mapped_column()


class PlatformGroupMember(Base):
    """A principal id a platform group had when it was last looked up."""

    __tablename__ = "platform_group_members"

    item: Mapped[str] = mapped_column(ForeignKey("platform_groups.item", ondelete="CASCADE"), primary_key=True)
    principal_id: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)
