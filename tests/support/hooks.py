"""A callback receiver on a real port (127.0.0.1, a free one): it keeps what it was sent and answers each POST with
the next status it was told to (200 once they run out)."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Hooks:
    url: str
    received: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    """What the next POSTs are answered, in order."""


@contextmanager
def hook_server() -> Iterator[Hooks]:
    hooks = Hooks("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            hooks.received.append(Received({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(hooks.statuses.pop(0) if hooks.statuses else 200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    hooks.url = f"http://127.0.0.1:{server.server_port}/hitl"
    thread = threading.Thread(target=server.serve_forever, name="hook-server", daemon=True)
    thread.start()
    try:
        yield hooks
    finally:
        server.shutdown()
        server.server_close()
