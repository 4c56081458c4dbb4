"""gateway/asgi.py driven as gunicorn's asgi worker drives it (scope, receive, send), in this process: requests
reach the Flask app as a WSGI server would hand them over, and an open event stream holds no pool thread."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask import Flask, request

from gateway import stream
from gateway.asgi import FlaskOnAsgi
from tests.conftest import KEYS, Stack, sqlite_settings
from tests.support.agent import script

ALICE = [(b"authorization", f"Bearer {KEYS['alice']}".encode())]
SSE = [(b"accept", b"text/event-stream"), *ALICE]


class Client:
    """One request to the ASGI app: its body arrives in `parts`; `leave()` is the client hanging up."""

    def __init__(self, app: FlaskOnAsgi, method: str, path: str, headers: list[tuple[bytes, bytes]] | None = None,
                 parts: list[bytes] | None = None, query: bytes = b"", client: tuple[str, int] = ("127.0.0.1", 4000)):
        self.scope = {"type": "http", "http_version": "1.1", "method": method, "scheme": "http", "path": path,
                      "raw_path": path.encode(), "query_string": query, "root_path": "", "headers": headers or [],
                      "server": ("127.0.0.1", 8000), "client": client}
        self.parts = list(parts or [b""])
        self.sent: list[dict[str, Any]] = []
        self.gone = asyncio.Event()
        self.task = asyncio.ensure_future(app(self.scope, self.receive, self.send))

    async def receive(self) -> dict[str, Any]:
        if self.parts:
            return {"type": "http.request", "body": self.parts.pop(0), "more_body": bool(self.parts)}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def leave(self) -> None:
        self.gone.set()

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    async def until(self, text: str, timeout: float = 10) -> None:
        async def seen() -> None:
            while text.encode() not in self.body:
                await asyncio.sleep(0.01)
        await asyncio.wait_for(seen(), timeout)


@pytest.fixture
def sqlite_stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path))
    yield built
    built.close()


def test_the_flask_app_gets_the_environ_a_wsgi_server_gives_it() -> None:
    echo = Flask(__name__)

    @echo.post("/échos/<name>")
    def show(name: str) -> dict[str, Any]:
        return {"name": name, "args": request.args.to_dict(), "body": request.get_json(), "peer": request.remote_addr,
                "forwarded": request.headers.get("X-Forwarded-For"), "trace": request.headers.get("X-Trace"),
                "url": request.url}

    async def call() -> Client:
        client = Client(FlaskOnAsgi(echo, threads=2), "POST", "/échos/ünï", query=b"a=1&b=%C3%A9",
                        headers=[(b"content-type", b"application/json"), (b"content-length", b"18"),
                                 (b"host", b"hitl.test"), (b"x_forwarded_for", b"10.0.0.1"),
                                 (b"x-trace", b"t1"), (b"x-trace", b"t2")],
                        parts=[b'{"said": ', b'"hello"}'], client=("203.0.113.9", 5000))
        await client.task
        return client

    client = asyncio.run(call())
    assert client.status == 200
    assert json.loads(client.body) == {
        "name": "ünï", "args": {"a": "1", "b": "é"}, "body": {"said": "hello"}, "peer": "203.0.113.9",
        "forwarded": None, "trace": "t1,t2", "url": "http://hitl.test/échos/ünï?a=1&b=é"}
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_open_streams_hold_no_thread_and_each_sees_new_events(sqlite_stack: Stack) -> None:
    """One pool thread: three streams open on it, and a request after them is still answered at once."""
    session_id, _ = sqlite_stack.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    app = FlaskOnAsgi(sqlite_stack.app, threads=1)

    async def scenario() -> None:
        streams = [Client(app, "GET", f"/api/sessions/{session_id}/events", SSE) for _ in range(3)]
        for client in streams:
            await client.until("event: turn.waiting")
        health = Client(app, "GET", "/healthz")
        await asyncio.wait_for(health.task, 5)
        assert health.status == 200
        [pending] = sqlite_stack.pending(session_id)
        await asyncio.to_thread(sqlite_stack.answer, pending["requestId"], "approve")
        for client in streams:
            await client.until("event: turn.completed")
            assert client.status == 200 and not client.task.done()
            assert dict(client.sent[0]["headers"])[b"content-type"].startswith(b"text/event-stream")
            client.leave()
        await asyncio.wait_for(asyncio.gather(*(client.task for client in streams)), 5)  # hung up: ended at once

    asyncio.run(scenario())


def test_a_stream_on_the_event_loop_sends_keepalives_and_ends_after_its_lifetime(
        sqlite_stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 0.2)
    monkeypatch.setattr(stream, "LIFETIME_SECONDS", 1.0)
    session_id, _ = sqlite_stack.start(script([("refund", {"charge_id": "ch_1", "amount": 5})]))
    app = FlaskOnAsgi(sqlite_stack.app, threads=1)

    async def scenario() -> Client:
        client = Client(app, "GET", f"/api/sessions/{session_id}/events", [(b"last-event-id", b"2"), *SSE])
        await asyncio.wait_for(client.task, 5)
        return client

    client = asyncio.run(scenario())
    frames = client.body.decode().split("\n\n")
    assert frames[0] == f"retry: {stream.RETRY_MILLISECONDS}"
    assert [f.split("\n")[0] for f in frames if f.startswith("id:")] == \
        [f"id: {e['seq']}" for e in sqlite_stack.events(session_id)[2:]]
    assert ": keepalive" in frames
    assert client.sent[-1] == {"type": "http.response.body", "body": b"", "more_body": False}


def test_stream_errors_are_answered_by_the_flask_view_as_json(sqlite_stack: Stack) -> None:
    app = FlaskOnAsgi(sqlite_stack.app, threads=1)

    async def call() -> Client:
        client = Client(app, "GET", "/api/sessions/ses_nope/events", SSE)
        await asyncio.wait_for(client.task, 5)
        return client

    client = asyncio.run(call())
    assert client.status == 404 and json.loads(client.body)["error"]["code"]
