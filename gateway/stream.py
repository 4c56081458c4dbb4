"""A session's events as Server-Sent Events: `GET /api/sessions/<id>/events` with `Accept: text/event-stream`.

The database is the record: the stream polls `events_after` briefly, so any web process (any gunicorn worker
on any host) serves any session, and a client that reconnects with `Last-Event-ID` misses nothing.
"""

from __future__ import annotations

import json
import logging
import re
import time
from collections.abc import Iterator
from typing import Any

from flask import Response, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from engine.errors import NotFound
from engine.protocol import Principal
from engine.queries import events_after
from engine.runtime import Runtime

from .auth import Caller, current_caller
from .errors import invalid_query
from .schemas import query_int

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


def stream_caller() -> Caller:
    """The API's own check; an EventSource cannot send headers, so `?access_token=<key>` may stand in for one."""
    token = request.args.get("access_token")
    if token and "Authorization" not in request.headers:
        request.environ["HTTP_AUTHORIZATION"] = f"Bearer {token}"
    return current_caller()


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


def event_stream(session_id: str) -> Response:
    """The SSE response; errors (401, 404, a bad cursor) are answered as JSON before the stream starts. A
    session the caller does not see is a 404, as one that does not exist."""
    seen_by = stream_caller().seen_by
    rt: Runtime = current_app.extensions["hitl"]
    after = resume_after()
    first = events_after(rt, session_id, after, BATCH, seen_by)
    return Response(
        frames(rt, session_id, after, first, seen_by),
        mimetype="text/event-stream",
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


def frames(rt: Runtime, session_id: str, after: int, batch: list[dict[str, Any]],
           seen_by: Principal | None) -> Iterator[str]:
    """Every event after `after`, once and in order, then each new one as it is committed, for LIFETIME_SECONDS
    (the client then reconnects, resuming after the last event it got)."""
    yield f"retry: {RETRY_MILLISECONDS}\n\n"
    last_write = time.monotonic()
    ends = last_write + LIFETIME_SECONDS
    while True:
        for event in batch:
            yield frame(event)
            after = event["seq"]
        now = time.monotonic()
        if batch:
            last_write = now
        elif now - last_write >= HEARTBEAT_SECONDS:
            yield ": keepalive\n\n"
            last_write = now
        if now >= ends:
            return
        if len(batch) < BATCH:
            time.sleep(POLL_SECONDS)
        try:
            batch = events_after(rt, session_id, after, BATCH, seen_by)
        except (SQLAlchemyError, NotFound):
            log.warning("event stream of %s stopped; a reconnecting client resumes", session_id, exc_info=True)
            return


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: `id` is the seq (what `Last-Event-ID` carries back), `event` the type, `data` the event."""
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"
