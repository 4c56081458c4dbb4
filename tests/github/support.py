"""GitHub as people use it, for the tests: comments delivered to the gateway as signed webhooks (GitHub's own
payload examples with our comment put in), and the thread the bot wrote, read back from a fake GitHub."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text
from werkzeug.test import TestResponse

from adapters.github import github_address
from engine.channels.delivery import shown_requests
from engine.channels.inbound import NOTICE
from engine.protocol import InputRequestOut
from engine.store.tables import Inbound, Session
from tests.conftest import Stack, WorkerProcess, make_stack, worker_env
from tests.github.fake_github import Comment, FakeGithub, FakeGithubServer
from tests.support.signing import github_signature

SECRET = "It's a test secret"
TOKEN = "ghp_test_token"
BOT = "hitl-bot"
REPO = "Codertocat/Hello-World"  # the repository of GitHub's payload examples
HOOK_ID = 109948940
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "github"


@dataclass(frozen=True)
class Person:
    login: str
    id: int
    type: str = "User"


ALICE, BOB, CAROL, DAVE = Person("alice", 1001), Person("bob", 1002), Person("carol", 1003), Person("dave", 1004)
BOT_USER = Person(BOT, 9001)  # a machine user with a token: only its login tells it apart from a person


def fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return data


def comment_event(body: str, who: Person, comment_id: int, *, issue: int = 1, action: str = "created",
                  template: str = "issue_comment_created", app: str | None = None) -> dict[str, Any]:
    """GitHub's `issue_comment` example with our comment, author and issue number put in."""
    payload = fixture(template)
    user = {**payload["comment"]["user"], "login": who.login, "id": who.id, "type": who.type}
    payload["action"] = action
    payload["comment"].update(id=comment_id, body=body, user=user,
                              performed_via_github_app={"id": 7, "slug": app, "name": app} if app else None)
    payload["issue"]["number"] = issue
    payload["sender"] = user
    return payload


def github_settings(api_url: str) -> dict[str, str]:
    return {"github_webhook_secret": SECRET, "github_token": TOKEN, "github_bot_login": BOT,
            "github_api_url": api_url}


@dataclass
class Sent:
    """A comment a person wrote, and what the webhook answered when GitHub delivered it."""

    comment: Comment
    response: TestResponse

    @property
    def outcome(self) -> str:
        return str((self.response.get_json() or {}).get("status"))


class Github:
    """A repository's issues, through the gateway: people comment, the bot's comments are read back."""

    def __init__(self, stack: Stack, fake: FakeGithub) -> None:
        self.stack, self.fake = stack, fake

    def deliver(self, payload: dict[str, Any] | bytes, *, event: str = "issue_comment", delivery: str | None = None,
                hook: int = HOOK_ID, signature: str | None = None) -> TestResponse:
        """POST a delivery to the webhook as GitHub does: signed over the exact bytes sent."""
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        headers = {"X-GitHub-Event": event, "X-GitHub-Delivery": delivery or f"d-{time.monotonic_ns()}",
                   "X-GitHub-Hook-ID": str(hook), "X-Hub-Signature-256": signature or github_signature(SECRET, body),
                   "User-Agent": "GitHub-Hookshot/test"}
        return self.stack.client(None).post("/github/webhook", data=body, headers=headers,
                                            content_type="application/json")

    def comment(self, who: Person, body: str, issue: int = 1, *, comment_id: int | None = None,
                wait: bool = True, **event: Any) -> Sent:
        """`who` writes a comment on the issue; GitHub delivers it to the webhook."""
        written = self.fake.add_comment(REPO, issue, who.login, body, comment_id)
        response = self.deliver(comment_event(body, who, written.id, issue=issue, **event))
        if wait:
            self.wait_idle()
        return Sent(written, response)

    def wait_idle(self) -> None:
        self.stack.wait_idle()

    def session(self, issue: int = 1) -> str:
        with self.stack.rt.db.read() as db:
            return db.execute(select(Session.id).where(Session.address == github_address(REPO, issue))
                              .order_by(Session.created_at.desc())).scalars().first() or ""

    def prompts(self, issue: int = 1) -> list[tuple[InputRequestOut, Comment]]:
        """The requests posted on the issue, oldest first, each with its comment as it looks now."""
        shown = shown_requests(self.stack.rt, "github", github_address(REPO, issue))
        return [(request, self.fake.comments[int(ref)]) for ref, request in reversed(shown)]

    def said(self, issue: int = 1) -> list[str]:
        """Every comment the bot wrote on the issue, as it reads now."""
        return [c.body for c in self.fake.by_bot(REPO, issue)]

    def inbound(self) -> list[Inbound]:
        """The deliveries stored (not the audit rows of notices given)."""
        with self.stack.rt.db.read() as db:
            return list(db.execute(select(Inbound).where(~Inbound.external_id.startswith(NOTICE))
                                   .order_by(Inbound.id)).scalars())


_shared: dict[str, Any] = {}


def shared_server(request: pytest.FixtureRequest) -> FakeGithubServer:
    """One fake GitHub on a real port for the test session (a worker process is told its URL once)."""
    if "server" not in _shared:
        _shared["server"] = FakeGithubServer(FakeGithub(TOKEN, BOT))
        request.session.addfinalizer(_shared["server"].close)
    server: FakeGithubServer = _shared["server"]
    return server


def shared_worker(request: pytest.FixtureRequest, server: FakeGithubServer) -> str:
    """The queue of an `hitl worker` (one for the test session) whose GitHub is `server`."""
    if "worker" not in _shared:
        queue = f"{request.getfixturevalue('queue_name')}-github"
        env = worker_env(request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_url"), queue,
                         GITHUB_WEBHOOK_SECRET=SECRET, GITHUB_TOKEN=TOKEN, GITHUB_BOT_LOGIN=BOT,
                         GITHUB_API_URL=server.url)
        log = request.getfixturevalue("tmp_path_factory").mktemp("github-worker") / "worker.log"
        worker = _shared["worker"] = WorkerProcess(env, log)
        _shared["queue"] = queue
        request.session.addfinalizer(lambda: worker.kill(15))
    worker = _shared["worker"]
    assert worker.proc.poll() is None, f"the GitHub worker died:\n{worker.tail()}"
    return str(_shared["queue"])


@contextmanager
def github_stack(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[Github]:
    """A `kind` stack with the GitHub channel on the fake server; on PostgreSQL its jobs run on a real worker."""
    server = shared_server(request)
    server.fake.reset()
    overrides: dict[str, Any] = github_settings(server.url)
    if kind == "postgres":
        overrides["queue"] = shared_worker(request, server)
    with make_stack(request, kind, tmp_path, **overrides) as stack:
        if kind == "postgres":
            own_job_ids(stack)
        yield Github(stack, server.fake)


def own_job_ids(stack: Stack) -> None:
    """RQ job ids are `<job>-<outbox id>`, and RQ keeps a job under its id in the whole Redis database, which
    other test runs share (and the previous test, whose ids `TRUNCATE ... RESTART IDENTITY` hands out again):
    a job whose id someone else's worker cleans up is lost until a sweep recovers its turn, 30 s later. This
    test's outbox ids start where no one else's are."""
    with stack.rt.db.write() as db:
        db.execute(text("SELECT setval(pg_get_serial_sequence('outbox', 'id'), :start)"),
                   {"start": random.randrange(10**6, 10**15)})
