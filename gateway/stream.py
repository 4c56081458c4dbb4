"""Server-Sent Events, for clients that send `Accept: text/event-stream`: a session's events
(`GET /api/sessions/<id>/events`) and the inbox of pending requests (`GET /api/inbox/events`).

The database is the record: a stream reads `events_after` whenever the process's poller (gateway/changes.py) sees
its session's event count move, so any web process (any gunicorn worker on any host) serves any session, and a
client that reconnects with `Last-Event-ID` misses nothing. Under the Procfile's web command (gateway/asgi.py) an
open stream is served by the worker's event loop and holds no thread.

Any other stream is served the same way: an `EventStream` over its own `read` and `Topic` (what its poller reads to
know that something changed), answered with `sse_response`. The inbox's stream has no topic: it reads its first
page of pending requests every POLL_SECONDS (ids only, at most 101 index rows) and says when that page changed.
A long-poll of a request (`GET /api/requests/<id>?wait=`) waits the same way, on its session's events, and answers
one JSON body (`LongPoll`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, Protocol

from flask import Response, current_app, request
from sqlalchemy.exc import SQLAlchemyError

from engine.errors import NotFound
from engine.jobs.runtime import Runtime
from engine.protocol import Principal
from engine.store.queries import events_after, pending_inbox, request_state

from .auth import Caller, current_caller
from .changes import POLL_SECONDS, SESSION_EVENTS, Changes, Topic
from .errors import invalid_query
from .schemas import PAGE, query_int

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 15.0  # a `: keepalive` comment after this long without a frame keeps proxies from closing it
BATCH = 500  # events read per query; a full batch is followed at once by the next
RETRY_MILLISECONDS = 1000  # how long a browser's EventSource waits before it reconnects
LIFETIME_SECONDS = 20.0
"""A stream ends after this long and its client reconnects after `Last-Event-ID`, missing nothing: a web process
stopping (a deploy, a restart) waits for its open requests only up to gunicorn's 30 s graceful timeout, Heroku's
grace too, and a stream that never ended held every stop that long and was then killed."""


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


ASYNC_BODY = "hitl.async_body"
"""A WSGI environ key a server may set (gateway/asgi.py does): a callable that takes an `EventStream` and sends it
itself, from an event loop, after the response's head; the WSGI body is then empty, and no thread waits on it.
Without it (`hitl serve`, any plain WSGI server) the stream is the WSGI body, and holds its thread while open."""


def event_stream(session_id: str) -> Response:
    """The SSE response; errors (401, 404, a bad cursor) are answered as JSON before the stream starts. A
    session the caller does not see is a 404, as one that does not exist."""
    seen_by = stream_caller().seen_by
    rt: Runtime = current_app.extensions["hitl"]
    after = resume_after()
    first = events_after(rt, session_id, after, BATCH, seen_by)
    return sse_response(EventStream(
        current_app.extensions["hitl-changes"], SESSION_EVENTS, session_id,
        lambda cursor: events_after(rt, session_id, cursor, BATCH, seen_by), after, first,
    ))


def inbox_stream() -> Response:
    """The inbox's SSE response: an `inbox` frame with `pending_inbox()` (the ids of the first page of pending
    requests the caller sees, and `next`) at once and again whenever it changes: the console's badge follows it.
    It has nothing to resume after (no `id:`): a reconnect starts with the inbox as it is."""
    seen_by = stream_caller().seen_by
    rt: Runtime = current_app.extensions["hitl"]
    shown: dict[str, Any] | None = None

    def read(cursor: int) -> list[dict[str, Any]]:
        nonlocal shown
        inbox = pending_inbox(rt, PAGE, seen_by)
        if inbox == shown:
            return []
        shown = inbox
        return [{"seq": cursor + 1, "inbox": inbox}]

    return sse_response(EventStream(current_app.extensions["hitl-changes"], None, "the inbox", read, 0, read(0),
                                    render=lambda item: f"event: inbox\ndata: {json.dumps(item['inbox'])}\n\n"))


def sse_response(stream: EventStream) -> Response:
    """The response that serves `stream`."""
    return served(stream, "text/event-stream")


def served(body: Served, mimetype: str) -> Response:
    """A 200 whose body `body` sends when it has it: handed to the server's event loop when it has one
    (`ASYNC_BODY`), else the WSGI body (its thread waits with it)."""
    send_later = request.environ.get(ASYNC_BODY)
    if send_later is not None:
        send_later(body)
    return Response(
        iter(()) if send_later is not None else iter(body),
        mimetype=mimetype,
        headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
    )


class Served(Protocol):
    """A body sent after the response's head, blocking (`iter`) or from an event loop (`aiter`)."""

    def __iter__(self) -> Iterator[str]: ...

    def aiter(self) -> AsyncIterator[str]: ...


def long_poll(request_id: str, seconds: int, seen_by: Principal | None) -> Response:
    """`GET /api/requests/<id>?wait=N`: the request (if `seen_by` sees it, else a 404) once it is no longer
    pending, or as it is after `seconds`. A request no longer pending at once is answered at once."""
    rt: Runtime = current_app.extensions["hitl"]
    poll = LongPoll(current_app.extensions["hitl-changes"], lambda: request_state(rt, request_id, seen_by),
                    seconds)
    body = poll.step()
    if body is not None:
        return Response(body, mimetype="application/json")
    return served(poll, "application/json")


class LongPoll:
    """One long-poll of a request: `read()` gives the request and its session's latest event seq, read together.
    Between reads it waits on `changes` for that session's events to pass the seq (SESSION_EVENTS), as an event
    stream does: every change to a request comes with an event. One JSON body, when the request closed or the
    time is up; served blocking (`iter`) or from an event loop (`aiter`, holding no thread while it waits)."""

    def __init__(self, changes: Changes, read: Callable[[], tuple[dict[str, Any], int]], seconds: float) -> None:
        self.changes, self.read = changes, read
        self.ends = time.monotonic() + seconds
        self.session, self.seen, self.idle = "", 0, 0.0
        self.last: dict[str, Any] | None = None

    def step(self) -> str | None:
        """The body, once there is one to send; else None, with what to wait for set. A read that fails after the
        first answers the request as last read: a long-poll is answered, never dropped mid-way."""
        try:
            request, self.seen = self.read()
        except (SQLAlchemyError, NotFound):
            if self.last is None:
                raise
            log.warning("long-poll of %s ended early; it answers the request as last read", self.last["requestId"],
                        exc_info=True)
            return json.dumps(self.last)
        self.last, self.session, self.idle = request, request["sessionId"], self.ends - time.monotonic()
        return json.dumps(request) if request["status"] != "pending" or self.idle <= 0 else None

    def __iter__(self) -> Iterator[str]:
        while (body := self.step()) is None:
            self.changes.wait(SESSION_EVENTS, self.session, self.seen, self.idle)
        yield body

    async def aiter(self) -> AsyncIterator[str]:
        while (body := await asyncio.to_thread(self.step)) is None:
            await self.changes.changed(SESSION_EVENTS, self.session, self.seen, self.idle)
        yield body


class EventStream:
    """The frames of one open stream: every item after `after`, once and in order, then each new one as it is
    committed, for LIFETIME_SECONDS (the client then reconnects, resuming after the last item it got).

    Items are dicts with a `seq` (the cursor), a `type` and their data; `read(cursor)` returns those after a cursor
    (at most BATCH, in order) and raises NotFound once the thing streamed is gone. Between reads the stream waits
    on `changes` until `topic`'s version of `key` passes the last seq it sent: it never polls the database itself.
    Without a topic it reads again every POLL_SECONDS. `render` makes an item's frame. Served blocking (`iter`) or
    from an event loop (`aiter`) alike."""

    def __init__(self, changes: Changes, topic: Topic | None, key: str, read: Callable[[int], list[dict[str, Any]]],
                 after: int, first: list[dict[str, Any]],
                 render: Callable[[dict[str, Any]], str] | None = None) -> None:
        self.changes, self.topic, self.key, self.read = changes, topic, key, read
        self.render = render or frame
        self.after = after
        self.batch: list[dict[str, Any]] | None = first
        self.started = False
        self.last_write = self.ends = 0.0
        self.ended = False
        self.idle = 0.0  # how long to wait for a change before the next step

    def step(self) -> list[str]:
        """The frames to send now (reading the database unless the batch is at hand); sets `ended` or `idle`."""
        now = time.monotonic()
        frames = []
        if not self.started:
            self.started, self.last_write, self.ends = True, now, now + LIFETIME_SECONDS
            frames.append(f"retry: {RETRY_MILLISECONDS}\n\n")
        batch, self.batch = self.batch, None
        if batch is None:
            try:
                batch = self.read(self.after)
            except (SQLAlchemyError, NotFound):
                log.warning("event stream of %s stopped; a reconnecting client resumes", self.key, exc_info=True)
                self.ended = True
                return frames
        for event in batch:
            frames.append(self.render(event))
            self.after = event["seq"]
        if batch:
            self.last_write = now
        elif now - self.last_write >= HEARTBEAT_SECONDS:
            frames.append(": keepalive\n\n")
            self.last_write = now
        self.ended = now >= self.ends
        more = len(batch) >= BATCH  # a full batch is followed at once by the next
        self.idle = 0.0 if more else min(self.last_write + HEARTBEAT_SECONDS, self.ends) - now
        return frames

    def __iter__(self) -> Iterator[str]:
        while True:
            yield from self.step()
            if self.ended:
                return
            if self.idle <= 0:
                continue
            if self.topic is None:
                time.sleep(min(self.idle, POLL_SECONDS))
            else:
                self.changes.wait(self.topic, self.key, self.after, self.idle)

    async def aiter(self) -> AsyncIterator[str]:
        """The same frames from an event loop: database reads run on a thread, waits cost no thread."""
        while True:
            for chunk in await asyncio.to_thread(self.step):
                yield chunk
            if self.ended:
                return
            if self.idle <= 0:
                continue
            if self.topic is None:
                await asyncio.sleep(min(self.idle, POLL_SECONDS))
            else:
                await self.changes.changed(self.topic, self.key, self.after, self.idle)


def frame(event: dict[str, Any]) -> str:
    """One SSE frame: `id` is the seq (what `Last-Event-ID` carries back), `event` the type, `data` the event."""
    return f"id: {event['seq']}\nevent: {event['type']}\ndata: {json.dumps(event)}\n\n"
