"""A local stand-in for the Messages endpoint of the Twilio REST API, reached through `TWILIO_API_URL`.

It runs in the test process on a thread, so it records what worker processes send as well as in-process
jobs, and answers like Twilio: the Message resource with a fresh sid, or an error body for a number told to fail.
"""

from __future__ import annotations

import base64
import json
import re
import threading
import uuid
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

from tests.support.fake_http import send_json

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "twilio"
MESSAGES = re.compile(r"^/2010-04-01/Accounts/(?P<account>AC\w+)/Messages\.json$")


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / name).read_text())
    return data


@dataclass(frozen=True)
class Sent:
    """One message the gateway asked Twilio to send."""

    sid: str
    account: str
    user: str  # the Basic auth user the SDK sent (the account sid)
    to: str
    sender: str  # From, or the Messaging Service SID
    body: str


class FakeTwilio:
    def __init__(self) -> None:
        self.sent: list[Sent] = []
        self.attempts: list[str] = []  # the To of every POST, failed or not
        self.failures: dict[str, tuple[int, dict[str, Any], int | None]] = {}
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host!s}:{port}"

    def reset(self) -> None:
        with self.lock:
            self.sent.clear()
            self.attempts.clear()
            self.failures.clear()

    def fail(self, to: str, status: int, error: dict[str, Any], times: int | None = None) -> None:
        """Messages to `to` get `status` with the error body `error`: the next `times` ones, or all."""
        with self.lock:
            self.failures[to] = (status, error, times)

    def to(self, number: str) -> list[str]:
        """Bodies sent to `number`, in order."""
        with self.lock:
            return [m.body for m in self.sent if m.to == number]

    def by_sid(self, sid: str) -> Sent:
        with self.lock:
            return next(m for m in self.sent if m.sid == sid)

    def after(self, sid: str) -> list[str]:
        """Bodies sent to the same number after message `sid`, in order."""
        with self.lock:
            first = next(i for i, m in enumerate(self.sent) if m.sid == sid)
            return [m.body for m in self.sent[first + 1:] if m.to == self.sent[first].to]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def answer(self, path: str, auth: str, form: dict[str, list[str]]) -> tuple[int, dict[str, Any]]:
        match = MESSAGES.match(path)
        if match is None:
            return 404, {"code": 20404, "message": "The requested resource was not found", "status": 404}
        fields = {name: values[0] for name, values in form.items()}
        to = fields.get("To", "")
        with self.lock:
            self.attempts.append(to)
            status, error, times = self.failures.get(to, (0, {}, 0))
            if times is None or times > 0:
                self.failures[to] = (status, error, None if times is None else times - 1)
                return status, error
            message = Sent(sid=f"SM{uuid.uuid4().hex}", account=match["account"], user=auth.partition(":")[0],
                           to=to, sender=fields.get("From") or fields.get("MessagingServiceSid", ""),
                           body=fields.get("Body", ""))
            self.sent.append(message)
        return 201, {**fixture("message_created.json"), "sid": message.sid, "account_sid": message.account,
                     "to": to, "from": fields.get("From"), "messaging_service_sid": fields.get("MessagingServiceSid"),
                     "body": message.body}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length") or 0)
                form = parse_qs(self.rfile.read(length).decode(), keep_blank_values=True)
                scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
                auth = base64.b64decode(token).decode() if scheme == "Basic" else ""
                status, payload = fake.answer(self.path, auth, form)
                send_json(self, status, payload)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler
