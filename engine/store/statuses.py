"""The values of every status column, one StrEnum per column (the state machines of DESIGN.md section 3).

A member equals the string stored in the database (`TurnStatus.WAITING == "waiting"`), so rows written before
these enums existed read the same and no migration is needed; the enums only give each value one spelling."""

from __future__ import annotations

from enum import StrEnum


class SessionStatus(StrEnum):
    """`sessions.status`: whether a turn of the session is queued, running or waiting."""

    IDLE = "idle"
    ACTIVE = "active"


class TurnStatus(StrEnum):
    """`turns.status` (engine/turns/transitions.py)."""

    QUEUED = "queued"
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"


ACTIVE_TURN = (TurnStatus.QUEUED, TurnStatus.RUNNING, TurnStatus.WAITING)
"""A turn in one of these has not ended: a session holds at most one that is not queued."""


class RunStatus(StrEnum):
    """`runs.status`: a run is one worker's go at a turn; it ends `interrupted` when the turn parks on a person."""

    RUNNING = "running"
    RESUMING = "resuming"
    INTERRUPTED = "interrupted"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    CRASHED = "crashed"


class CallStatus(StrEnum):
    """`tool_calls.status` (engine/turns/calls.py); `unknown`: found running after its worker died (rule 12)."""

    PROPOSED = "proposed"
    AWAITING_APPROVAL = "awaiting_approval"
    AWAITING_INPUT = "awaiting_input"
    APPROVED = "approved"
    RUNNING = "running"
    UNKNOWN = "unknown"
    COMPLETED = "completed"
    FAILED = "failed"
    NOT_RUN = "not_run"


CALL_DONE = (CallStatus.COMPLETED, CallStatus.FAILED, CallStatus.NOT_RUN)
"""A call in one of these has its result."""


class ResultStatus(StrEnum):
    """The status of a call's result (`action.result` events, the tool message the model reads)."""

    COMPLETED = "completed"
    FAILED = "failed"
    REJECTED = "rejected"
    CANCELLED = "cancelled"


class RequestStatus(StrEnum):
    """`input_requests.status`: open until it settles (rule 5); how it settled is its outcome."""

    PENDING = "pending"
    RESOLVED = "resolved"


class Outcome(StrEnum):
    """`input_requests.outcome`: how a request settled."""

    APPROVED = "approved"
    DENIED = "denied"
    ANSWERED = "answered"
    CANCELLED = "cancelled"
    IGNORED = "ignored"
    EXPIRED = "expired"


class CandidateOutcome(StrEnum):
    """`response_candidates.outcome`: the response policy's verdict on one response (rule 4), `stale` when the
    request had settled before it, `pending` until judged."""

    PENDING = "pending"
    ALLOWED = "allowed"
    REJECTED = "rejected"
    STALE = "stale"
    FAILED = "failed"
    TIMED_OUT = "timed-out"


class CallbackStatus(StrEnum):
    """`external_requests.callback_status` (engine/jobs/callbacks.py); None for a request without a URL."""

    WAITING = "waiting"
    SENDING = "sending"
    RETRYING = "retrying"
    DELIVERED = "delivered"
    FAILED = "failed"


class ContactStatus(StrEnum):
    """`contacts.status` (engine/channels/contacts.py): an SMS number that texted STOP is unreachable."""

    REACHABLE = "reachable"
    UNREACHABLE = "unreachable"
