"""The database schema (DESIGN.md section 3): typed SQLAlchemy 2 tables, the same on SQLite and PostgreSQL.

Its modules follow the lifecycle: `base` (the declarative Base and what every table shares), `turns` (sessions,
turns, runs, the transcript, tool calls, events), `input_requests` (input requests and their satellites, the answers
given to them), `channels` (inbound deliveries, the outbox, posts, contacts) and `people` (people, groups, and
platform groups' members as last looked up).
Every table is importable from here, and importing this package registers all of them on `Base.metadata`.
"""

from engine.store.tables.base import NAMING_CONVENTION, Base, IdType, utcnow
from engine.store.tables.channels import UNPROCESSED, Contact, Inbound, Outbox, Post, PrunedInbound
from engine.store.tables.input_requests import (
    EscalationApprover,
    ExternalRequest,
    InputRequest,
    RequestApprover,
    RequestPlace,
    RequestTimer,
    ResponseCandidate,
)
from engine.store.tables.people import Group, GroupMember, Person, PersonPrincipal, PlatformGroup, PlatformGroupMember
from engine.store.tables.turns import ApprovalGrant, Event, Message, Run, Session, ToolCall, Turn

__all__ = [
    "NAMING_CONVENTION", "UNPROCESSED", "ApprovalGrant", "Base", "Contact", "EscalationApprover", "Event",
    "ExternalRequest", "Group", "GroupMember", "IdType", "Inbound", "InputRequest", "Message", "Outbox", "Person",
    "PersonPrincipal", "PlatformGroup", "PlatformGroupMember", "Post", "PrunedInbound", "RequestApprover",
    "RequestPlace", "RequestTimer", "ResponseCandidate", "Run", "Session", "ToolCall", "Turn", "utcnow",
]
