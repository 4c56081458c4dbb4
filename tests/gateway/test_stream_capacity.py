"""Open event streams do not starve other requests: the Procfile's web command, for real (gunicorn on PostgreSQL
and Redis, with a `hitl worker` and Slack against the fake), holds 200 open streams while `/healthz` and a signed
Slack click on a waiting approval card still answer within 100 ms, and the streams see the click's events."""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import requests

from tests.conftest import ROOT, TEST_AGENT
from tests.slack.workspace import SECRET, TOKEN, Workspace, workspace
from tests.support.agent import read_ledger, script
from tests.support.signing import slack_headers

STREAMS = 200
WITHIN = 0.100  # seconds: what `/healthz` and a Slack click must answer in, with the streams open
OPERATOR_KEY = "stream-capacity-operator-key-0123456789"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def procfile_web() -> str:
    """The `web:` command of the Procfile, as a platform runs it (in a shell, with $PORT set)."""
    for line in (ROOT / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == "web":
            return command.strip()
    raise AssertionError("the Procfile has no web process")


@pytest.fixture
def slack_on_postgres(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    with workspace(request, "postgres", tmp_path) as built:
        yield built


@pytest.fixture
def web(slack_on_postgres: Workspace, tmp_path: Path) -> Iterator[str]:
    """The Procfile's web command on a free port, configured as the test stack is; yields its base URL."""
    stack = slack_on_postgres.stack
    port = free_port()
    env = {
        **os.environ, "PORT": str(port), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
        "DATABASE_URL": stack.settings.database_url, "REDIS_URL": str(stack.settings.redis_url),
        "HITL_QUEUE": stack.settings.queue, "HITL_AGENT": TEST_AGENT, "PYTHONPATH": str(ROOT),
        "HITL_API_KEYS": f"{OPERATOR_KEY}=ops:operator", "SLACK_BOT_TOKEN": TOKEN,
        "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": slack_on_postgres.fake.url,
    }
    env.pop("WEB_CONCURRENCY", None)
    log = (tmp_path / "web.log").open("wb")
    proc = subprocess.Popen(["/bin/sh", "-c", f"exec {procfile_web()}"], cwd=ROOT, env=env, stdout=log,
                            stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, (tmp_path / "web.log").read_text()
            try:
                if requests.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except (requests.ConnectionError, requests.Timeout):
                pass
            assert time.monotonic() < deadline, "the web process did not start:\n" + (tmp_path / "web.log").read_text()
            time.sleep(0.1)
        yield base
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        log.close()


class Streams:
    """`STREAMS` event streams held open on raw sockets, spread over some sessions; reads what they are sent."""

    def __init__(self, base: str, session_ids: list[str], count: int) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.selector = selectors.DefaultSelector()
        self.received: dict[socket.socket, bytes] = {}
        for n in range(count):
            sock = socket.create_connection((host, int(port)))
            sock.setblocking(False)
            sock.sendall(
                f"GET /api/sessions/{session_ids[n % len(session_ids)]}/events HTTP/1.1\r\nHost: {host}\r\n"
                f"Accept: text/event-stream\r\nAuthorization: Bearer {OPERATOR_KEY}\r\n\r\n".encode())
            self.selector.register(sock, selectors.EVENT_READ)
            self.received[sock] = b""

    def read(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            for key, _ in self.selector.select(left):
                sock: socket.socket = key.fileobj  # type: ignore[assignment]
                data = sock.recv(65536)
                self.received[sock] += data
                if not data:
                    self.selector.unregister(sock)

    def serving(self) -> int:
        """How many streams got their response head and first frame."""
        return sum(data.startswith(b"HTTP/1.1 200") and b"retry:" in data for data in self.received.values())

    def wait_serving(self, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while self.serving() < len(self.received) and time.monotonic() < deadline:
            self.read(0.1)
        return self.serving()

    def seeing(self, event_type: str) -> int:
        return sum(f"event: {event_type}\n".encode() in data for data in self.received.values())

    def close(self) -> None:
        for sock in self.received:
            sock.close()
        self.selector.close()


def timed(send: Any) -> tuple[float, Any]:
    """Seconds `send()` took to be answered (a timeout counts as 2 s), and its response."""
    started = time.perf_counter()
    try:
        response = send()
    except requests.Timeout:
        return 2.0, None
    return time.perf_counter() - started, response


def click(base: str, slack: Workspace, card: Any) -> tuple[float, Any]:
    """alice presses Approve on `card`, signed as Slack signs it; the seconds it took to answer."""
    body = urlencode({"payload": json.dumps(slack.click_payload("alice", card, "Approve"))})
    headers = slack_headers(SECRET, body, content_type="application/x-www-form-urlencoded")
    return timed(lambda: requests.post(f"{base}/slack/interactions", data=body, headers=headers, timeout=2))


def test_200_open_streams_leave_healthz_and_a_slack_click_answered_within_100_ms(
    slack_on_postgres: Workspace, web: str
) -> None:
    slack = slack_on_postgres
    mentions = [slack.mention("alice", script([("refund", {"charge_id": f"ch_{n}", "amount": n})]))
                for n in range(3)]
    cards = [slack.cards(mention)[0] for mention in mentions]
    session_ids = [slack.session_of(mention) for mention in mentions]
    idle = min(timed(lambda: requests.get(f"{web}/healthz", timeout=2))[0] for _ in range(3))

    streams = Streams(web, session_ids, STREAMS)
    try:
        serving = streams.wait_serving(timeout=10)
        health = [timed(lambda: requests.get(f"{web}/healthz", timeout=2)) for _ in range(3)]
        clicks = [click(web, slack, card) for card in cards]
        best_health, best_click = min(t for t, _ in health), min(t for t, _ in clicks)
        seen = (f"{serving} of {STREAMS} streams served; /healthz answered in {best_health * 1000:.0f} ms (idle: "
                f"{idle * 1000:.0f} ms), the Slack click in {best_click * 1000:.0f} ms (best of 3; 2000: no answer)")
        assert serving == STREAMS and best_health < WITHIN and best_click < WITHIN, seen
        assert all(response is not None and response.status_code == 200 for _, response in health + clicks)

        slack.wait_idle()  # the clicks were taken: each approval resumed its turn, and every stream saw it
        assert sorted(e["charge_id"] for e in read_ledger() if e["tool"] == "refund") == ["ch_0", "ch_1", "ch_2"]
        deadline = time.monotonic() + 5
        while streams.seeing("turn.completed") < STREAMS and time.monotonic() < deadline:
            streams.read(0.1)
        assert streams.seeing("turn.completed") == STREAMS
    finally:
        streams.close()
