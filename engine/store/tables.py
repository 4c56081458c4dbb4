"""The database schema (DESIGN.md section 3): typed SQLAlchemy 2 tables, the same on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    SQLColumnExpression,
    String,
    Text,
    UniqueConstraint,
    false,
    true,
)
from sqlalchemy.ext.hybrid import hybrid_property
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from engine.store.statuses import CallStatus, CandidateOutcome, ContactStatus, RequestStatus, SessionStatus, TurnStatus
from engine.store.storage import (
    PRINCIPAL,
    DigestType,
    JSONType,
    KeylessJSON,
    OptionsJSON,
    ToolCallsJSON,
    UTCDateTime,
    digest_of,
    id_type,
    new_id,
)

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    return datetime.now(UTC)


IdType = BigInteger().with_variant(Integer(), "sqlite")


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
    initiator_digest: Mapped[str | None] = mapped_column(DigestType, default=digest_of("initiator"))
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
        # a user's or an agent's sessions, newest first (engine/store/access.py)
        Index("ix_sessions_initiator_digest_created_at", "initiator_digest", "created_at", "id"),
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


class InputRequest(Base):
    __tablename__ = "input_requests"

    request_id: Mapped[str] = mapped_column(id_type(80), primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"))
    turn_id: Mapped[str | None] = mapped_column(ForeignKey("turns.id", ondelete="CASCADE"), index=True)
    """None for an external request (engine/answers/external.py): no turn waits on it."""
    run_id: Mapped[str | None] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    call_id: Mapped[str | None] = mapped_column(id_type())
    position: Mapped[int] = mapped_column(Integer, default=0)
    kind: Mapped[str] = mapped_column(String(24))
    prompt: Mapped[str] = mapped_column(Text)
    action: Mapped[dict[str, Any] | None] = mapped_column(KeylessJSON(("kind", "callId", "toolName", "input")))
    options: Mapped[list[Any]] = mapped_column(OptionsJSON())
    allow_freeform: Mapped[bool] = mapped_column(Boolean, default=False)
    display: Mapped[str] = mapped_column(String(16))
    requested_by: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    status: Mapped[str] = mapped_column(String(16), default=RequestStatus.PENDING)
    outcome: Mapped[str | None] = mapped_column(String(16))
    response: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    responder: Mapped[dict[str, Any] | None] = mapped_column(PRINCIPAL)
    seq: Mapped[int] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    expires_at: Mapped[datetime | None] = mapped_column()
    resolved_at: Mapped[datetime | None] = mapped_column()
    on_timeout: Mapped[str | None] = mapped_column(String(16))
    """What expiry means when it is not the kind's default (`approve`; engine/answers/schedules.py)."""
    reminded: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """How many reminders went out (engine/answers/timers.py)."""
    escalated_at: Mapped[datetime | None] = mapped_column()
    shown_in_session: Mapped[bool] = mapped_column(Boolean, default=True, server_default=true())
    """False: shown only at its `show_to` places (`request_places`), not in its own session's channel
    (engine/answers/places.py)."""
    shown_elsewhere: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    """Whether it has `request_places` (show_to places, or an escalation's since this column): closing one that
    has none reads none."""

    __table_args__ = (
        Index("ix_input_requests_status_created_at", "status", "created_at"),
        Index("ix_input_requests_status_expires_at", "status", "expires_at"),
        Index("ix_input_requests_session_id_seq", "session_id", "seq"),
    )


class ExternalRequest(Base):
    """What a request an agent running elsewhere made (POST /api/requests) holds beyond the InputRequest: the
    idempotency key it was made with (unique per requester, by the digest of the requester's identity) and the
    digest of the body, who may settle it, the agent's metadata, and its callback's delivery."""

    __tablename__ = "external_requests"

    request_id: Mapped[str] = mapped_column(ForeignKey("input_requests.request_id", ondelete="CASCADE"),
                                            primary_key=True)
    requester_digest: Mapped[str] = mapped_column(DigestType)
    idempotency_key: Mapped[str | None] = mapped_column(String(200))
    body_digest: Mapped[str] = mapped_column(DigestType)
    request_metadata: Mapped[dict[str, Any] | None] = mapped_column("metadata", JSONType)
    callback_url: Mapped[str | None] = mapped_column(Text)
    callback_status: Mapped[str | None] = mapped_column(String(16))
    """`waiting` (the request is open), `sending`, `retrying`, `delivered` or `failed`; None without a URL."""
    callback_attempts: Mapped[int] = mapped_column(Integer, default=0)
    callback_error: Mapped[str | None] = mapped_column(Text)
    callback_due_at: Mapped[datetime | None] = mapped_column()
    """When its next attempt is due (or the attempt under way is presumed lost); None when none is owed."""
    quorum: Mapped[int | None] = mapped_column(Integer)
    """How many distinct people must approve it (engine/answers/quorum.py); None: one."""

    __table_args__ = (UniqueConstraint("requester_digest", "idempotency_key"),)


# the callbacks owed, for sweep(): only those rows are in it
Index("ix_external_requests_callback_due_at", ExternalRequest.callback_due_at,
      postgresql_where=ExternalRequest.callback_due_at.is_not(None),
      sqlite_where=ExternalRequest.callback_due_at.is_not(None))


class RequestApprover(Base):
    """One item of an external request's `approvers` (a principal id, `person:<name>`, `group:<name>`,
    `slack-usergroup:<id>` or `github-team:<org>/<slug>`): the people it names may settle it. A request without
    rows here may be answered by anyone its place admits."""

    __tablename__ = "request_approvers"

    request_id: Mapped[str] = mapped_column(ForeignKey("input_requests.request_id", ondelete="CASCADE"),
                                            primary_key=True)
    principal_id: Mapped[str] = mapped_column(String(200), primary_key=True)

    __table_args__ = (Index("ix_request_approvers_principal_id", "principal_id"),)  # the requests one is asked
class RequestTimer(Base):
    """A request's next reminder (`remind`: `every` seconds apart, at most `max`) or its escalation (`escalate`:
    `data` holds the places it goes to and the approvers it adds). The sweep claims a row once `due_at` has come
    (engine/answers/timers.py); `due_at` is None once nothing more is due: the last reminder went out, the request
    escalated, or it closed."""

    __tablename__ = "request_timers"

    request_id: Mapped[str] = mapped_column(ForeignKey("input_requests.request_id", ondelete="CASCADE"),
                                            primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    due_at: Mapped[datetime | None] = mapped_column()
    every: Mapped[float | None] = mapped_column(Float)
    max: Mapped[int | None] = mapped_column(Integer)
    data: Mapped[dict[str, Any] | None] = mapped_column(JSONType)


# the timers still to fall due, for sweep(): only those rows are in it, so finding the due ones costs a few index
# entries however many requests wait
Index("ix_request_timers_due_at", RequestTimer.due_at, postgresql_where=RequestTimer.due_at.is_not(None),
      sqlite_where=RequestTimer.due_at.is_not(None))


class EscalationApprover(Base):
    """A principal id an escalated request's escalation added: it may settle the request too (engine/answers/timers.py),
    and it is asked the request (engine/store/access.py)."""

    __tablename__ = "escalation_approvers"

    request_id: Mapped[str] = mapped_column(ForeignKey("input_requests.request_id", ondelete="CASCADE"),
                                            primary_key=True)
    principal_id: Mapped[str] = mapped_column(String(200), primary_key=True, index=True)


class RequestPlace(Base):
    """A session besides its own where a request is shown (a `show_to` place, or a place it escalated to): that
    session's channel shows it, a reply there answers it, and its prompt there is updated when it closes."""

    __tablename__ = "request_places"

    request_id: Mapped[str] = mapped_column(ForeignKey("input_requests.request_id", ondelete="CASCADE"),
                                            primary_key=True)
    session_id: Mapped[str] = mapped_column(ForeignKey("sessions.id", ondelete="CASCADE"), primary_key=True,
                                            index=True)


class ResponseCandidate(Base):
    __tablename__ = "response_candidates"

    candidate_id: Mapped[str] = mapped_column(id_type(), primary_key=True, default=lambda: new_id("cand"))
    request_id: Mapped[str] = mapped_column(
        ForeignKey("input_requests.request_id", ondelete="CASCADE"), index=True
    )
    responder: Mapped[dict[str, Any]] = mapped_column(PRINCIPAL)
    responder_digest: Mapped[str | None] = mapped_column(DigestType, default=digest_of("responder"))
    decision: Mapped[str | None] = mapped_column(String(200))
    text: Mapped[str | None] = mapped_column(Text)  # a note; an approve's edited input, as JSON (answers/edits.py)
    outcome: Mapped[str] = mapped_column(String(16), default=CandidateOutcome.PENDING)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    judged_at: Mapped[datetime | None] = mapped_column()


# the requests a person already responded to (engine/store/access.py)
Index("ix_response_candidates_responder_digest_request_id", ResponseCandidate.responder_digest,
      ResponseCandidate.request_id)
# the few candidates never judged, for sweep(): their process died while the response policy ran
Index("ix_response_candidates_unjudged_created_at", ResponseCandidate.created_at,
      postgresql_where=ResponseCandidate.judged_at.is_(None), sqlite_where=ResponseCandidate.judged_at.is_(None))


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
