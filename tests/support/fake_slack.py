"""A local fake of the Slack Web API (http.server on port 0, in a thread), pointed at by SLACK_API_URL.

Like Bolt's own tests/mock_web_api_server: it records every call with the token it carried, keeps the messages
it was asked to post (each with every version chat.update made of it) and the ephemeral messages, and can
answer a method with a 429 (and `Retry-After`) or an error, a given number of times, or hold a call unanswered.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from tests.support import faults
from tests.support.fake_http import send_json

TEAM = "T0TEST"
BOT_USER = "UBOT"
BOT_ID = "BBOT"


@dataclass
class Call:
    method: str
    token: str | None
    params: dict[str, Any]


@dataclass
class Message:
    """A message the bot posted; `versions[0]` as posted, then one per chat.update."""

    channel: str
    ts: str
    thread_ts: str | None
    versions: list[dict[str, Any]]

    @property
    def now(self) -> dict[str, Any]:
        return self.versions[-1]


@dataclass
class Ephemeral:
    channel: str
    user: str
    text: str
    thread_ts: str | None


@dataclass
class Failure:
    status: int
    error: str
    retry_after: int | None
    times: int


@dataclass
class FakeSlack:
    calls: list[Call] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    ephemerals: list[Ephemeral] = field(default_factory=list)
    failures: dict[str, Failure] = field(default_factory=dict)
    installation: dict[str, Any] = field(default_factory=dict)
    """What oauth.v2.access answers (an OAuth install's result)."""
    usergroups: dict[str, list[str]] = field(default_factory=dict)
    """The user ids usergroups.users.list answers, by user group id (any other: `no_such_subteam`)."""
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    sequence: int = 0
    held: tuple[str, Callable[[dict[str, Any]], Any]] | None = None
    """The method whose next call is held, and which of its calls (see `hold`)."""
    released: threading.Event = field(default_factory=threading.Event)

    def start(self) -> FakeSlack:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                fake.handle(self)

            def do_POST(self) -> None:
                fake.handle(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, name="fake-slack", daemon=True).start()
        return self

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def reset(self) -> None:
        with self.lock:
            self.calls.clear()
            self.messages.clear()
            self.ephemerals.clear()
            self.failures.clear()
            self.usergroups.clear()
            self.held = None
        self.released.set()

    def fail(self, method: str, status: int = 429, error: str = "ratelimited", retry_after: int | None = 3,
             times: int = 1) -> None:
        """Answer the next `times` calls of `method` (`*`: of any method) with HTTP `status` (429: with
        Retry-After) and `error`."""
        with self.lock:
            self.failures[method] = Failure(status, error, retry_after if status == 429 else None, times)

    def hold(self, method: str, matching: Callable[[dict[str, Any]], Any] = lambda params: True) -> None:
        """The next call of `method` whose parameters are `matching` takes effect, is noted in the ledger as the
        fault point `slack:<method>` (tests/support/faults.py), then gets no answer until `release()`: its caller
        waits as on a slow network, and a test kills it there."""
        with self.lock:
            self.held = (method, matching)
            self.released.clear()

    def release(self) -> None:
        self.released.set()

    # -- what tests read ---------------------------------------------------------------------------------

    def called(self, method: str) -> list[Call]:
        with self.lock:
            return [c for c in self.calls if c.method == method]

    def message(self, channel: str, ts: str) -> Message:
        with self.lock:
            return next(m for m in self.messages if (m.channel, m.ts) == (channel, ts))

    def thread(self, channel: str, thread_ts: str) -> list[Message]:
        with self.lock:
            return [m for m in self.messages if m.channel == channel and m.thread_ts == thread_ts]

    def wait_for(self, check: Callable[[], Any], timeout: float = 30.0, what: str = "the fake Slack") -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if found := check():
                return found
            time.sleep(0.02)
        raise AssertionError(f"timed out waiting for {what}; calls: {[c.method for c in self.calls]}")

    # -- the Web API -------------------------------------------------------------------------------------

    def handle(self, request: BaseHTTPRequestHandler) -> None:
        url = urlsplit(request.path)
        method = url.path.strip("/")
        params: dict[str, Any] = dict(parse_qsl(url.query))
        body = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        if "json" in (request.headers.get("Content-Type") or ""):
            params.update(json.loads(body or b"{}"))
        else:
            params.update(parse_qsl(body.decode()))
        if isinstance(params.get("blocks"), str):
            params["blocks"] = json.loads(params["blocks"])
        authorization = request.headers.get("Authorization") or ""
        token = authorization.removeprefix("Bearer ") or params.get("token")
        status, headers, answer = self.answer(method, token, params)
        if self.holding(method, params):
            faults.note(f"slack:{method}", None)
            self.released.wait(60)
            return  # its caller was killed meanwhile: there is nobody to answer
        send_json(request, status, answer, headers)

    def holding(self, method: str, params: dict[str, Any]) -> bool:
        with self.lock:
            if self.held is None or self.held[0] != method or not self.held[1](params):
                return False
            self.held = None
            return True

    def answer(self, method: str, token: str | None, params: dict[str, Any]) -> tuple[int, dict[str, str], Any]:
        with self.lock:
            self.calls.append(Call(method, token, params))
            failure = self.failures.get(method) or self.failures.get("*")
            if failure is not None and failure.times > 0:
                failure.times -= 1
                headers = {"Retry-After": str(failure.retry_after)} if failure.retry_after is not None else {}
                return failure.status, headers, {"ok": False, "error": failure.error}
            return 200, {}, self.ok(method, params)

    def ok(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        if method == "auth.test":
            return {"ok": True, "url": "https://test.slack.com/", "team": "Test", "user": "hitl", "team_id": TEAM,
                    "user_id": BOT_USER, "bot_id": BOT_ID, "is_enterprise_install": False}
        if method == "chat.postMessage":
            self.sequence += 1
            ts = f"{1700000000 + self.sequence}.{self.sequence:06d}"
            version = {"text": params.get("text"), "blocks": params.get("blocks")}
            self.messages.append(Message(params["channel"], ts, params.get("thread_ts"), [version]))
            return {"ok": True, "channel": params["channel"], "ts": ts, "message": version}
        if method == "chat.update":
            found = [m for m in self.messages if (m.channel, m.ts) == (params["channel"], params["ts"])]
            if not found:
                return {"ok": False, "error": "message_not_found"}
            found[0].versions.append({"text": params.get("text"), "blocks": params.get("blocks")})
            return {"ok": True, "channel": params["channel"], "ts": params["ts"]}
        if method == "chat.postEphemeral":
            self.ephemerals.append(Ephemeral(params["channel"], params["user"], params["text"],
                                             params.get("thread_ts")))
            return {"ok": True, "message_ts": f"{time.time():.6f}"}
        if method == "conversations.open":  # the bot's DM with one user: the same channel every time
            return {"ok": True, "channel": {"id": f"D{params['users']}"}}
        if method == "views.open":
            return {"ok": True, "view": {"id": f"V{len(self.calls)}", **params["view"]}}
        if method == "usergroups.users.list":
            if params.get("usergroup") not in self.usergroups:
                return {"ok": False, "error": "no_such_subteam"}
            return {"ok": True, "users": self.usergroups[params["usergroup"]]}
        if method == "oauth.v2.access":
            return {"ok": True, **self.installation}
        return {"ok": True}
