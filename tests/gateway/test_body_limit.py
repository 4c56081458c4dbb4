"""Every route refuses a body over 1 MiB with a 413 naming the limit, before reading it: a client that announces
100 MB gets its answer without sending a byte of it, and a chunked body is cut off at the limit."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from urllib.parse import urlsplit

import pytest

from gateway.body_limit import MAX_BODY_BYTES
from tests.conftest import Stack, make_stack
from tests.github.support import github_settings
from tests.slack.workspace import shared_fake, slack_settings
from tests.support.live_server import live_server
from tests.twilio.support import twilio_settings

HUNDRED_MB = 100 * 2**20
TOO_LARGE = {"code": "body_too_large", "message": f"the request body may be at most {MAX_BODY_BYTES} bytes",
             "details": {"maxBytes": MAX_BODY_BYTES}}
ROUTES = [("POST", "/slack/events"), ("POST", "/slack/interactions"), ("POST", "/twilio/sms"),
          ("POST", "/github/webhook"), ("POST", "/api/sessions"), ("PATCH", "/api/requests/req_x"),
          ("GET", "/"), ("GET", "/healthz"), ("POST", "/no/such/route")]


@pytest.fixture(scope="module")
def every_channel(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """A gateway with Slack, Twilio and GitHub configured (no call reaches their APIs: nothing is accepted)."""
    fake = shared_fake(request)
    settings = {**slack_settings(fake), **twilio_settings("http://127.0.0.1:9"),
                **github_settings("http://127.0.0.1:9")}
    with make_stack(request, "sqlite", tmp_path_factory.mktemp("limits"), **settings) as stack:
        yield stack


@pytest.fixture(scope="module")
def server(every_channel: Stack) -> Iterator[tuple[str, int]]:
    with live_server(every_channel.app) as url:
        place = urlsplit(url)
        yield str(place.hostname), int(place.port or 80)


def head(method: str, path: str, **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: localhost", "Content-Type: application/json",
             *(f"{name}: {value}" for name, value in headers.items()), "", ""]
    return "\r\n".join(lines).encode()


def answer(connection: socket.socket) -> tuple[int, dict[str, object]]:
    """The status and JSON body of the response on `connection` (read until the server closes it or the body
    is complete)."""
    received = b""
    while b"\r\n\r\n" not in received:
        chunk = connection.recv(65536)
        assert chunk, "the server closed the connection without an answer"
        received += chunk
    headers, _, body = received.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in headers.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(headers.split(b" ")[1]), json.loads(body)


@pytest.mark.parametrize("method,path", ROUTES)
def test_a_100_mb_body_is_refused_before_a_byte_of_it_is_read(server: tuple[str, int], method: str,
                                                               path: str) -> None:
    with socket.create_connection(server, timeout=5) as connection:
        started = time.monotonic()
        connection.sendall(head(method, path, **{"Content-Length": str(HUNDRED_MB)}))  # and nothing more
        status, body = answer(connection)
    assert status == 413
    assert body == {"error": TOO_LARGE}
    assert time.monotonic() - started < 2


def chunked(server: tuple[str, int], path: str, size: int, final: bool) -> tuple[int, dict[str, object]]:
    """POST `size` bytes with no length announced (chunked); without the final chunk the body never ends."""
    chunk = b"x" * 65536
    with socket.create_connection(server, timeout=5) as connection:
        connection.sendall(head("POST", path, **{"Transfer-Encoding": "chunked"}))
        try:
            for start in range(0, size, len(chunk)):
                piece = chunk[: size - start]
                connection.sendall(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            if final:
                connection.sendall(b"0\r\n\r\n")
        except OSError:  # the server answered and closed before taking it all
            pass
        return answer(connection)


@pytest.mark.parametrize("path", ["/slack/events", "/slack/interactions", "/twilio/sms", "/github/webhook",
                                  "/api/sessions", "/healthz"])
def test_a_chunked_body_is_cut_off_at_the_limit(server: tuple[str, int], path: str) -> None:
    """No length announced: the body is read up to the limit, then refused (the rest is never read)."""
    assert chunked(server, path, MAX_BODY_BYTES + 2 * 65536, final=False) == (413, {"error": TOO_LARGE})


def test_a_body_at_the_limit_is_read(server: tuple[str, int]) -> None:
    """Exactly MAX_BODY_BYTES is allowed, announced or chunked: GitHub's webhook reads it and refuses its
    signature (401, not 413)."""
    with socket.create_connection(server, timeout=5) as connection:
        connection.sendall(head("POST", "/github/webhook", **{"Content-Length": str(MAX_BODY_BYTES)})
                           + b"x" * MAX_BODY_BYTES)
        assert answer(connection)[0] == 401
    assert chunked(server, "/github/webhook", MAX_BODY_BYTES, final=True)[0] == 401
