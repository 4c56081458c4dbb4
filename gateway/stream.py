"""Server-Sent Events, for clients that send `Accept: text/event-stream`: a session's events
(`GET /api/sessions/<id>/events`) and the inbox of pending requests (`GET /api/inbox/events`).

The database is the record: a stream polls it briefly, so any web process (any gunicorn worker on any host)
serves any stream, and a client that reconnects misses nothing (a session's stream resumes after
`Last-Event-ID`; the inbox's starts with how the inbox is now).
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from flask import Response, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from engine.errors import NotFound
from engine.protocol import Principal
from engine.queries import events_after, pending_inbox
from engine.runtime import Runtime

from .auth import current_principal
from .errors import invalid_query
from .schemas import PAGE, query_int

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 15.0  # a `: keepalive` comment after this long without a frame keeps proxies from closing it
POLL_SECONDS = 0.25  # how often an open stream reads the database for new events
BATCH = 500  # events read per query; a full batch is followed at once by the next
RETRY_MILLISECONDS = 1000  # how long a browser's EventSource waits before it reconnects
LIFETIME_SECONDS = 20.0
"""A stream ends after this long and its client reconnects after `Last-Event-ID`, missing nothing: a web process
stopping (a deploy, a restart) waits for its open requests only up to gunicorn's 30 s graceful timeout, Heroku's
grace too, and a stream that never ended held every stop that long and was then killed; each stream's thread is
also handed back this often."""


def wants_event_stream() -> bool:
    """True when the client asks for SSE (an EventSource sends `Accept: text/event-stream`)."""
    return request.accept_mimetypes.best_match(["application/json", "text/event-stream"]) == "text/event-stream"


ACCESS_TOKEN = re.compile(r"(\baccess_token=)[^&#\s\"]*")


def redact_access_token(text: str) -> str:
    """`text` (a request line, a URL) with the key of any `access_token=` hidden, for logs."""
    return ACCESS_TOKEN.sub(r"\1[hidden]", text)


def stream_principal() -> Principal:
    """The API's own check; an EventSource cannot send headers, so `?access_token=<key>` may stand in for one."""
    token = request.args.get("access_token")
    if token and "Authorization" not in request.headers:
        request.environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return current_principal()


def resume_after() -> int:
    """The last seq the client has: `Last-Event-ID` (sent by a reconnecting EventSource) wins over `?after=`."""
    for name, raw in (("Last-Event-ID", request.headers.get("Last-Event-ID")), ("after", request.args.get("after"))):
        given = (raw or "").strip()
        if not given:
            continue
        value = query_int(given)
        if value is None:
            raise invalid_query(name)
        return value
    return 0


Polled = tuple[list[str], bool]
"""What one read of a stream found: the frames to send, and whether more are ready at once (a full batch)."""


def event_stream(session_id: str) -> Response:
    """A session's SSE response; errors (401, 404, a bad cursor) are answered as JSON before the stream starts."""
    stream_principal()
    rt: Runtime = current_app.extensions["hitl"]
    cursor = resume_after()

    def read() -> Polled:
        nonlocal cursor
        batch = events_after(rt, session_id, cursor, BATCH)
        if batch:
            cursor = batch[-1]["seq"]
        return [frame(event) for event in batch], len(batch) == BATCH

    return served(read, f"session {session_id}")


def inbox_stream() -> Response:
    """The inbox's SSE response: an `inbox` frame with `pending_inbox()` (the ids of the oldest page of pending
    requests, and `next`) at once and again whenever it changes: the console's badge follows it."""
    stream_principal()
    rt: Runtime = current_app.extensions["hitl"]
    shown: dict[str, Any] | None = None

    def read() -> Polled:
        nonlocal shown
        inbox = pending_inbox(rt, PAGE)
        if inbox == shown:
            return [], False
        shown = inbox
        return [f"event: inbox\ndata: {json.dumps(inbox)}\n\n"], False

    return served(read, "the inbox")


def served(read: Callable[[], Polled], what: str) -> Response:
    """The stream of what `read` finds, its first read done now (so its errors are a JSON answer)."""
    return Response(
        frames(read, read(), what),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def frames(read: Callable[[], Polled], first: Polled, what: str) -> Iterator[str]:
    """What each read finds, in order, for LIFETIME_SECONDS (the client then reconnects); a keepalive comment
    after HEARTBEAT_SECONDS without a frame."""
    yield f"retry: {RETRY_MILLISECONDS}\n\n"
    last_write = time.monotonic()
    ends = last_write + LIFETIME_SECONDS
    batch, more = first
    while True:
        yield from batch
        now = time.monotonic()
        if batch:
            last_write = now
        elif now - last_write >= HEARTBEAT_SECONDS:
            yield ": keepalive\n\n"
            last_write = now
        if now >= ends:
            return
        if not more:
            time.sleep(POLL_SECONDS)
        try:
            batch, more = read()
        except (SQLAlchemyError, NotFound):
            log.warning("event stream of %s stopped; a reconnecting client resumes", what, exc_info=True)
            return


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: `id` is the seq (what `Last-Event-ID` carries back), `event` the type, `data` the event."""
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"
