"""An external request's callback: owed when the request closes, sent at least once by `send_callback` jobs.

Its state is a row with a status and a due time (DESIGN.md section 10, "Time"): `waiting` while the request is
open; the transaction that closes it makes it `sending`, due now, with a `send_callback` job in the outbox. A job
claims a due callback by moving its due time a lease ahead (a second job, or the sweep, then finds it not due),
POSTs `{"type": "input.resolved", "request": {...}}` signed per Standard Webhooks (engine/jobs/webhooks.py, its
`webhook-id` the same on every attempt), and records the outcome: `delivered` on a 2xx; otherwise `retrying`, due
again after a backoff (CALLBACK_BACKOFF_SECONDS), or `failed` once that would be more than CALLBACK_RETRY_HOURS
after the request closed. sweep() enqueues every callback that falls due: a retry, or an attempt whose worker
died before it recorded anything (sent again: the receiver deduplicates on the id).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import bindparam, select, update
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.answers.input_requests import external_fields, request_wire
from engine.jobs.runtime import Runtime
from engine.jobs.webhooks import WebhookFailed, WebhookRefused, post_signed
from engine.store.statuses import CallbackStatus
from engine.store.tables import ExternalRequest, InputRequest

log = logging.getLogger(__name__)

SENDING = (CallbackStatus.SENDING, CallbackStatus.RETRYING)
"""The statuses of a callback owed."""
_OWE = update(ExternalRequest).where(
    ExternalRequest.request_id == bindparam("request"), ExternalRequest.callback_status == CallbackStatus.WAITING,
).values(callback_status=CallbackStatus.SENDING, callback_due_at=bindparam("now")).returning(ExternalRequest.request_id)
_CLAIM = update(ExternalRequest).where(
    ExternalRequest.request_id == bindparam("request"), ExternalRequest.callback_status.in_(SENDING),
    ExternalRequest.callback_due_at <= bindparam("now"),
).values(callback_due_at=bindparam("until")).returning(ExternalRequest)
_RECORD = update(ExternalRequest).where(ExternalRequest.request_id == bindparam("request")).values(
    callback_status=bindparam("status"), callback_attempts=bindparam("attempts"),
    callback_error=bindparam("error"), callback_due_at=bindparam("due", type_=ExternalRequest.callback_due_at.type))
"""Built once (see turns/transitions.py)."""


def owe_callback(rt: Runtime, db: DbSession, request_id: str) -> None:
    """In the transaction that closes an external request: its callback, if it has one, is due now, and a job to
    send it goes to the outbox with the close."""
    if db.execute(_OWE, {"request": request_id, "now": rt.now()}).first() is not None:
        rt.enqueue(db, "send_callback", request_id)


@dataclass(frozen=True)
class Attempt:
    url: str
    body: bytes
    attempts: int
    closed_at: datetime


def send_callback(rt: Runtime, request_id: str) -> None:
    """Job body: one attempt, if the callback is due (a job that finds it claimed or delivered does nothing)."""
    attempt = claim(rt, request_id)
    if attempt is None:
        return
    error = None
    try:
        if rt.callback_key is None:
            raise WebhookRefused("HITL_CALLBACK_SECRET is not set where the callback is sent")
        post_signed(attempt.url, attempt.body, key=rt.callback_key, message_id=f"msg_{request_id}",
                    timestamp=int(rt.now().timestamp()), allowed_hosts=rt.callback_hosts)
    except (WebhookRefused, WebhookFailed) as exc:
        error = str(exc)
        log.warning("callback of %s, attempt %d: %s", request_id, attempt.attempts + 1, error)
    record(rt, request_id, attempt, error)


def claim(rt: Runtime, request_id: str) -> Attempt | None:
    """Take a due callback for CALLBACK_LEASE_SECONDS and read what to send; None when it is not due."""
    with rt.transaction() as db:
        now = rt.now()
        external = db.scalars(_CLAIM, {"request": request_id, "now": now,
                                       "until": now + timedelta(seconds=defaults.CALLBACK_LEASE_SECONDS)},
                              execution_options={"synchronize_session": False}).one_or_none()
        if external is None or external.callback_url is None:
            return None
        request = db.get_one(InputRequest, request_id)
        assert request.resolved_at is not None  # a callback is owed only once its request closed
        shown = request_wire(request) | external_fields(db, request, external, callback=False)
        body = {"type": "input.resolved", "request": shown}
        return Attempt(external.callback_url, json.dumps(body).encode(), external.callback_attempts,
                       request.resolved_at)


def record(rt: Runtime, request_id: str, attempt: Attempt, error: str | None) -> None:
    """`delivered`, or `retrying` after the backoff, or `failed` once retrying would pass the retry window."""
    now, attempts = rt.now(), attempt.attempts + 1
    status, due = CallbackStatus.DELIVERED, None
    if error is not None:
        backoff = defaults.CALLBACK_BACKOFF_SECONDS
        due = now + timedelta(seconds=backoff[min(attempts, len(backoff)) - 1])
        status = CallbackStatus.RETRYING
        if due > attempt.closed_at + timedelta(hours=defaults.CALLBACK_RETRY_HOURS):
            status, due = CallbackStatus.FAILED, None
            log.error("callback of %s failed for good after %d attempts: %s", request_id, attempts, error)
    with rt.transaction() as db:
        db.execute(_RECORD, {"request": request_id, "status": status, "attempts": attempts, "error": error,
                             "due": due})


def due_callbacks(rt: Runtime, limit: int = 500) -> list[str]:
    """The callbacks due now (for sweep(), which leaves out those whose job waits in the outbox)."""
    with rt.db.read() as db:
        return list(db.execute(select(ExternalRequest.request_id).where(
            ExternalRequest.callback_due_at <= rt.now()).order_by(ExternalRequest.callback_due_at)
            .limit(limit)).scalars())
