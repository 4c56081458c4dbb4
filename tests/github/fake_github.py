"""GitHub's REST API as far as the channel uses it, in memory: issue comments, reactions, collaborator roles,
users by id.

Mounted with `responses` for in-process tests, or served on a real port (`FakeGithubServer`) for an `hitl
worker` process, which `responses` cannot reach. Comment ids come from one counter, so the comments tests
write and the ones the bot posts are ordered as on GitHub.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import responses
from requests import PreparedRequest

from tests.support.fake_http import send_json

Answer = tuple[int, dict[str, str], Any]


@dataclass
class Comment:
    id: int
    repository: str  # lower case: GitHub's paths are case-insensitive
    issue: int
    login: str
    body: str
    reactions: list[str] = field(default_factory=list)  # the bot's reactions


ROUTES = [
    ("POST", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/(?P<issue>\d+)/comments$"), "create"),
    ("PATCH", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<comment>\d+)$"), "update"),
    ("POST", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/issues/comments/(?P<comment>\d+)/reactions$"), "react"),
    ("GET", re.compile(r"^/repos/(?P<repo>[^/]+/[^/]+)/collaborators/(?P<login>[^/]+)/permission$"), "role"),
    ("GET", re.compile(r"^/orgs/(?P<org>[^/]+)/teams/(?P<slug>[^/?]+)/members\?per_page=(?P<per_page>\d+)"
                       r"&page=(?P<page>\d+)$"), "members"),
    ("GET", re.compile(r"^/user/(?P<account>\d+)$"), "user"),
]

LEGACY = {"admin": "admin", "maintain": "write", "write": "write", "triage": "read", "read": "read", "none": "none"}
"""GitHub's `permission` for each role: maintain reads `write`, triage reads `read`."""


class FakeGithub:
    def __init__(self, token: str, bot_login: str) -> None:
        self.token, self.bot_login = token, bot_login
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.ids = itertools.count(1000)
            self.comments: dict[int, Comment] = {}
            self.roles: dict[str, str] = {}
            self.users: dict[int, str] = {}  # account id -> login (any other id: 404)
            self.custom_roles: dict[str, str] = {}  # an organization's custom role -> the legacy base GitHub gives
            self.calls: list[tuple[str, str]] = []
            self.down = False  # every call answers 502
            self.gone: set[int] = set()  # issues deleted, or out of the token's reach: commenting answers 404
            self.teams: dict[str, list[tuple[str, int]]] = {}  # "<org>/<slug>" -> its members' (login, id)

    def next_id(self) -> int:
        with self.lock:
            return next(self.ids)

    def add_comment(self, repository: str, issue: int, login: str, body: str, comment_id: int | None = None) -> Comment:
        """A person's comment in the thread (the webhook that tells the gateway is the test's business)."""
        comment = Comment(comment_id or self.next_id(), repository.lower(), issue, login, body)
        with self.lock:
            self.comments[comment.id] = comment
        return comment

    def thread(self, repository: str, issue: int) -> list[Comment]:
        with self.lock:
            return [c for c in self.comments.values() if (c.repository, c.issue) == (repository.lower(), issue)]

    def by_bot(self, repository: str, issue: int) -> list[Comment]:
        return [c for c in self.thread(repository, issue) if c.login == self.bot_login]

    def handle(self, method: str, path: str, authorization: str | None, body: bytes) -> Answer:
        with self.lock:
            self.calls.append((method, path))
            if self.down:
                return 502, {}, {"message": "Server Error"}
        if authorization != f"Bearer {self.token}":
            return 401, {}, {"message": "Bad credentials"}
        for route_method, pattern, name in ROUTES:
            found = pattern.match(path)
            if found and route_method == method:
                data = json.loads(body) if body else {}
                answer: Answer = getattr(self, name)(data, **found.groupdict())
                return answer
        return 404, {}, {"message": "Not Found"}

    def create(self, data: dict[str, Any], repo: str, issue: str) -> Answer:
        if int(issue) in self.gone:
            return 404, {}, {"message": "Not Found"}
        comment = self.add_comment(repo, int(issue), self.bot_login, data["body"])
        return 201, {}, {"id": comment.id, "body": comment.body, "user": {"login": self.bot_login, "type": "Bot"}}

    def update(self, data: dict[str, Any], repo: str, comment: str) -> Answer:
        with self.lock:
            found = self.comments.get(int(comment))
            if found is None or found.repository != repo.lower():
                return 404, {}, {"message": "Not Found"}
            found.body = data["body"]
        return 200, {}, {"id": found.id, "body": found.body}

    def react(self, data: dict[str, Any], repo: str, comment: str) -> Answer:
        with self.lock:
            found = self.comments.get(int(comment))
            if found is None or found.repository != repo.lower():
                return 404, {}, {"message": "Not Found"}
            if data["content"] in found.reactions:
                return 200, {}, {"content": data["content"]}
            found.reactions.append(data["content"])
        return 201, {}, {"content": data["content"]}

    def role(self, data: dict[str, Any], repo: str, login: str) -> Answer:
        """As GitHub answers: `role_name` the role (a custom role's name), `permission` its legacy base role."""
        role = self.roles.get(login, "write")
        base = LEGACY.get(role) or self.custom_roles.get(role, "read")
        return 200, {}, {"permission": base, "role_name": role, "user": {"login": login}}


    def members(self, data: dict[str, Any], org: str, slug: str, per_page: str, page: str) -> Answer:
        """A team's members, a page at a time; 404 for a team GitHub does not know (or will not show)."""
        team = self.teams.get(f"{org}/{slug}")
        if team is None:
            return 404, {}, {"message": "Not Found"}
        start = (int(page) - 1) * int(per_page)
        return 200, {}, [{"login": login, "id": user_id, "type": "User"}
                         for login, user_id in team[start:start + int(per_page)]]

    def user(self, data: dict[str, Any], account: str) -> Answer:
        login = self.users.get(int(account))
        if login is None:
            return 404, {}, {"message": "Not Found"}
        return 200, {}, {"login": login, "id": int(account), "type": "User"}


def mount(fake: FakeGithub, mock: responses.RequestsMock, base_url: str) -> None:
    """Answer every call to `base_url` from `fake`, in this process (a GitHub Enterprise URL has a path)."""
    prefix = re.sub(r"^https?://[^/]+", "", base_url.rstrip("/"))

    def answer(request: PreparedRequest) -> tuple[int, dict[str, str], str]:
        path = (request.path_url or "").removeprefix(prefix)
        body = request.body.encode() if isinstance(request.body, str) else (request.body or b"")
        status, headers, data = fake.handle(request.method or "", path, request.headers.get("Authorization"), body)
        return status, headers, json.dumps(data)

    for method in ("GET", "POST", "PATCH"):
        mock.add_callback(method, re.compile(re.escape(base_url.rstrip("/")) + "/.*"), callback=answer,
                          content_type="application/json")


class FakeGithubServer:
    """`fake` on 127.0.0.1 (a free port), in a thread."""

    def __init__(self, fake: FakeGithub) -> None:
        self.fake = fake

        class Handler(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                status, headers, data = fake.handle(self.command, self.path, self.headers.get("Authorization"), body)
                send_json(self, status, data, headers)

            do_GET = do_POST = do_PATCH = answer

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_port}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, name="fake-github", daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
