"""The tables of the requests people are asked: the InputRequest, what an external one holds beyond it
(ExternalRequest), who may settle it (RequestApprover, EscalationApprover), its reminders and escalation
(RequestTimer), the other places it is shown (RequestPlace), and the answers given to it (ResponseCandidate)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String, Text, UniqueConstraint, false, true
from sqlalchemy.orm import Mapped, mapped_column

from engine.store.statuses import CandidateOutcome, RequestStatus
from engine.store.storage import (
    PRINCIPAL,
    DigestType,
    JSONType,
    KeylessJSON,
    OptionsJSON,
    digest_of,
    id_type,
    new_id,
    principal_id_of,
)
from engine.store.tables.base import Base, utcnow


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
    requester_id: Mapped[str | None] = mapped_column(String(200), index=True)
    """The requester's principal id: the requests any principal of a person made (engine/store/access.py)."""
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
    responder_id: Mapped[str | None] = mapped_column(String(200), default=principal_id_of("responder"))
    decision: Mapped[str | None] = mapped_column(String(200))
    text: Mapped[str | None] = mapped_column(Text)  # a note; an approve's edited input, as JSON (answers/edits.py)
    outcome: Mapped[str] = mapped_column(String(16), default=CandidateOutcome.PENDING)
    reason: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    judged_at: Mapped[datetime | None] = mapped_column()


# the requests a person already responded to (engine/store/access.py)
Index("ix_response_candidates_responder_digest_request_id", ResponseCandidate.responder_digest,
      ResponseCandidate.request_id)
# the requests any principal of a person responded to (engine/store/access.py)
Index("ix_response_candidates_responder_id_request_id", ResponseCandidate.responder_id, ResponseCandidate.request_id)
# the few candidates never judged, for sweep(): their process died while the response policy ran
Index("ix_response_candidates_unjudged_created_at", ResponseCandidate.created_at,
      postgresql_where=ResponseCandidate.judged_at.is_(None), sqlite_where=ResponseCandidate.judged_at.is_(None))
