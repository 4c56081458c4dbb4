"""GitHub comments as the contract driver: each session is an issue; people comment on it.

* open / type: a comment that mentions the bot (`@hitl-bot <text>`);
* press: a comment `/approve`, `/deny` or `/answer <n>` (the option's number in the prompt);
* shown: the bot's prompt comments as they read now (open while their how-to line is there);
* told: the bot's replies addressed to the person (`@login ...`), and a 👎 on their comments.

The channel shows one request at a time, and a comment answers the prompt posted before it. A person who
decided on a request still waiting behind the shown one answers it once its prompt is posted: a press of a
request not shown yet is kept, and commented when its prompt appears.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.contract.driver import Shown
from tests.github.support import ALICE, BOB, BOT, CAROL, REPO, Github, github_stack

PEOPLE = {person.login: person for person in (ALICE, BOB, CAROL)}
CHOICE = re.compile(r"^\d+\. (.+)$")
HOW_TO = "\nReply `/"


@contextmanager
def driver(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[GithubDriver]:
    with github_stack(request, kind, tmp_path) as github:
        yield GithubDriver(github)


class GithubDriver:
    name = "github"

    def __init__(self, github: Github) -> None:
        self.github, self.stack = github, github.stack
        self.issues: dict[str, int] = {}  # session id -> its issue number
        self.numbers = itertools.count(1)
        self.decided: list[tuple[str, str, str, str]] = []  # (session, request, option, who), not shown yet

    def open(self, message: str, who: str) -> str:
        issue = next(self.numbers)
        self.github.comment(PEOPLE[who], f"@{BOT} {message}", issue)
        session_id = self.github.session(issue)
        self.issues[session_id] = issue
        return session_id

    def ask(self, message: str, who: str) -> str:
        issue = next(self.numbers)
        created = self.stack.client(who).post("/api/sessions", json={
            "message": message, "channel": "github", "address": {"repo": REPO, "issue": issue}})
        assert created.status_code == 201, created.get_json()
        self.github.wait_idle()
        self.issues[session_id := str(created.get_json()["id"])] = issue
        return session_id

    def said(self, session_id: str) -> list[str]:
        return self.github.said(self.issues[session_id])

    def shown(self, session_id: str) -> list[Shown]:
        return [Shown(request.request_id, comment.body, [m[1] for line in comment.body.split("\n")
                                                         if (m := CHOICE.match(line))], HOW_TO in comment.body)
                for request, comment in self.github.prompts(self.issues[session_id])]

    def press(self, session_id: str, request_id: str, option_id: str, who: str) -> None:
        self.decided.append((session_id, request_id, option_id, who))
        self.answer_what_is_shown(session_id)

    def type(self, session_id: str, text: str, who: str) -> None:
        self.github.comment(PEOPLE[who], f"@{BOT} {text}", self.issues[session_id])
        self.answer_what_is_shown(session_id)

    def told(self, session_id: str, who: str) -> list[str]:
        issue, login = self.issues[session_id], PEOPLE[who].login
        replies = [body for body in self.github.said(issue) if body.startswith(f"@{login} ")]
        thumbs_down = ["👎" for c in self.github.fake.thread(REPO, issue) if c.login == login and "-1" in c.reactions]
        return replies + thumbs_down

    def answer_what_is_shown(self, session_id: str) -> None:
        """Comment every decided press whose prompt is posted (an answer can bring the next prompt)."""
        while True:
            shown = {s.request_id: s for s in self.shown(session_id)}
            ready = next((d for d in self.decided if d[0] == session_id and d[1] in shown), None)
            if ready is None:
                return
            self.decided.remove(ready)
            _, request_id, option_id, who = ready
            self.github.comment(PEOPLE[who], command(shown[request_id], option_id), self.issues[session_id])


def command(shown: Shown, option_id: str) -> str:
    if option_id == "approve":
        return "/approve"
    if option_id == "deny":
        return "/deny"
    labels = [choice.split(" - ")[0] for choice in shown.choices]
    return f"/answer {labels.index(option_id) + 1}"
