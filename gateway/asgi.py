"""The web process of the Procfile: `gunicorn --worker-class asgi 'gateway.asgi:create_asgi_app()'`.

Each gunicorn worker runs one asyncio event loop. Every request is handed to the Flask app on a pool of
HITL_WEB_THREADS threads, as gunicorn's gthread worker does, so request code (database calls, channel clients, a
response policy's `asyncio.run`) runs on real threads exactly as before. An event stream is opened the same way (the
Flask view checks the key, the session and the cursor, and reads the first events), then handed back to the event
loop (`stream.ASYNC_BODY`), which sends its frames while it is open: a waiting stream holds no thread, so open
console tabs never take the threads that webhooks need.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from flask import Flask

from .app import create_app
from .settings import Settings, load_settings
from .stream import ASYNC_BODY, Served

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
T = TypeVar("T")


def create_asgi_app(settings: Settings | None = None) -> FlaskOnAsgi:
    settings = settings or load_settings()
    return FlaskOnAsgi(create_app(settings), settings.web_threads)


class FlaskOnAsgi:
    """An ASGI application serving a WSGI one on a thread pool, and its event streams from the event loop."""

    def __init__(self, app: Flask, threads: int) -> None:
        self.app = app
        self.pool = ThreadPoolExecutor(threads, thread_name_prefix="hitl-web")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan, websocket: gunicorn goes on without them
            raise ValueError(f"{scope['type']} is not served")
        call = WsgiCall(scope, receive, send, asyncio.get_running_loop())
        await call.loop.run_in_executor(self.pool, call.run, self.app)
        if call.stream is not None:
            await call.serve_stream(call.stream)


class WsgiCall:
    """One request: `run` calls the WSGI app on a pool thread; a stream it hands over is served by `serve_stream`."""

    def __init__(self, scope: Scope, receive: Receive, send: Send, loop: asyncio.AbstractEventLoop) -> None:
        self.scope, self.receive, self.send, self.loop = scope, receive, send, loop
        self.status = ""
        self.headers: list[tuple[bytes, bytes]] = []
        self.head_sent = False
        self.stream: Served | None = None

    def run(self, app: Flask) -> None:
        environ = wsgi_environ(self.scope, RequestBody(self))
        environ[ASYNC_BODY] = self.take_stream
        result: Iterable[bytes] = app(environ, self.start_response)
        try:
            for chunk in result:
                if chunk:
                    self.write(chunk)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        if not self.status.startswith("200"):  # the view that opened it failed after all: its error is the answer
            self.stream = None
        self.write(b"", more=self.stream is not None)

    def take_stream(self, stream: Served) -> None:
        self.stream = stream

    def start_response(self, status: str, headers: list[tuple[str, str]],
                       exc_info: Any = None) -> Callable[[bytes], None]:
        if exc_info is not None and self.head_sent:
            raise exc_info[1].with_traceback(exc_info[2])
        self.status = status
        self.headers = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers]
        return self.write

    def write(self, chunk: bytes, more: bool = True) -> None:
        """Send body bytes from the pool thread (the head first, once)."""
        if not self.head_sent:
            self.head_sent = True
            self.wait(self.send({"type": "http.response.start", "status": int(self.status.split(" ", 1)[0]),
                                 "headers": self.headers}))
        self.wait(self.send({"type": "http.response.body", "body": chunk, "more_body": more}))

    def wait(self, awaitable: Awaitable[T]) -> T:
        """Run a coroutine of the connection on the event loop, from the pool thread, and wait for its result."""
        async def call() -> T:
            return await awaitable
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result()

    async def serve_stream(self, stream: Served) -> None:
        """Send the stream's frames until it ends or the client goes (noticed at once, not at the next write)."""
        frames = asyncio.ensure_future(self.send_frames(stream))
        gone = asyncio.ensure_future(self.disconnected())
        await asyncio.wait([frames, gone], return_when=asyncio.FIRST_COMPLETED)
        for task in (frames, gone):
            task.cancel()
        if frames.done() and not frames.cancelled():
            frames.result()  # its error, if any, is the request's

    async def send_frames(self, stream: Served) -> None:
        async for chunk in stream.aiter():
            await self.send({"type": "http.response.body", "body": chunk.encode(), "more_body": True})
        await self.send({"type": "http.response.body", "body": b"", "more_body": False})

    async def disconnected(self) -> None:
        while (await self.receive())["type"] != "http.disconnect":
            pass


class RequestBody:
    """`wsgi.input`: the request body as the server receives it, read from the pool thread when the app asks."""

    def __init__(self, call: WsgiCall) -> None:
        self.call = call
        self.buffer = bytearray()
        self.more = True

    def _fill(self) -> None:
        message = self.call.wait(self.call.receive())
        if message["type"] == "http.request":
            self.buffer += message.get("body", b"")
            self.more = bool(message.get("more_body", False))
        else:  # the client went: the body ends here
            self.more = False

    def _take(self, size: int) -> bytes:
        taken = bytes(self.buffer[:size])
        del self.buffer[:size]
        return taken

    def read(self, size: int | None = -1) -> bytes:
        while self.more and (size is None or size < 0 or len(self.buffer) < size):
            self._fill()
        return self._take(len(self.buffer) if size is None or size < 0 else size)

    def readline(self, size: int | None = -1) -> bytes:
        while self.more and b"\n" not in self.buffer and (size is None or size < 0 or len(self.buffer) < size):
            self._fill()
        end = self.buffer.find(b"\n") + 1 or len(self.buffer)
        return self._take(end if size is None or size < 0 else min(end, size))

    def readlines(self, hint: int = -1) -> list[bytes]:
        return list(iter(self.readline, b""))

    def __iter__(self) -> Any:
        return iter(self.readline, b"")


def wsgi_environ(scope: Scope, body: RequestBody) -> dict[str, Any]:
    """The PEP 3333 environ of an ASGI HTTP scope, as gunicorn's WSGI workers build it: REMOTE_ADDR is the peer,
    the scheme is what gunicorn trusted (`forwarded_allow_ips`), and a header whose name holds `_` is dropped (it
    would read as the `-` one: `X_Forwarded_For` as `X-Forwarded-For`)."""
    path = scope["path"]
    root = scope.get("root_path", "")
    if root and path.startswith(root):
        path = path[len(root):]
    server = scope.get("server") or ("localhost", 80)
    client = scope.get("client") or ("", 0)
    query = scope.get("query_string", b"")
    raw = (scope.get("raw_path") or scope["path"].encode()) + (b"?" + query if query else b"")
    environ: dict[str, Any] = {
        "REQUEST_METHOD": scope["method"], "SCRIPT_NAME": latin1(root), "PATH_INFO": latin1(path),
        "QUERY_STRING": query.decode("latin-1"), "RAW_URI": raw.decode("latin-1"),
        "REQUEST_URI": raw.decode("latin-1"), "SERVER_NAME": str(server[0]), "SERVER_PORT": str(server[1]),
        "REMOTE_ADDR": str(client[0]), "REMOTE_PORT": str(client[1]),
        "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
        "wsgi.version": (1, 0), "wsgi.url_scheme": scope.get("scheme", "http"), "wsgi.input": body,
        "wsgi.input_terminated": True, "wsgi.errors": sys.stderr, "wsgi.multithread": True,
        "wsgi.multiprocess": True, "wsgi.run_once": False,
    }
    for raw_name, raw_value in scope.get("headers", []):
        name, value = raw_name.decode("latin-1").upper(), raw_value.decode("latin-1")
        if "_" in name:
            continue
        key = name.replace("-", "_")
        if key not in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            key = "HTTP_" + key
        environ[key] = f"{environ[key]},{value}" if key in environ else value
    return environ


def latin1(text: str) -> str:
    """A decoded path as WSGI carries it: its UTF-8 bytes, one character each."""
    return text.encode("utf-8").decode("latin-1")
