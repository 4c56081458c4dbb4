"""Slack as the contract driver: a person mentions the bot, presses a card's button or menu entry, replies in
the thread, and reads the cards and ephemeral messages the fake Slack Web API holds."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select

from adapters.slack import Where
from engine.store.tables import Post, Session
from tests.contract.driver import Shown
from tests.slack.workspace import USERS, Workspace, workspace
from tests.support.fake_slack import Message

NAMES = {user_id: name for name, user_id in USERS.items()}


@contextmanager
def driver(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[SlackDriver]:
    with workspace(request, kind, tmp_path) as slack:
        yield SlackDriver(slack)


def as_read(text: str) -> str:
    """Text as a Slack client shows it: a mention is the person's name, escapes undone."""
    return html.unescape(re.sub(r"<@([UW][A-Z0-9]+)>", lambda m: NAMES.get(m.group(1), m.group(0)), text))


def looks(card: dict[str, Any]) -> tuple[str, list[str], bool]:
    """A card's text, the choices it offers (menu entries with their description, option buttons), and
    whether it still has controls."""
    text: list[str] = []
    choices: list[str] = []
    controls = False
    for block in card["blocks"]:
        if block["type"] == "section":
            text.append(block.get("text", {}).get("text", ""))
        elif block["type"] == "context":
            text.extend(e["text"] for e in block["elements"])
        elif block["type"] == "actions":
            controls = True
            for element in block["elements"]:
                choices.extend(" - ".join(filter(None, [o["text"]["text"], o.get("description", {}).get("text")]))
                               for o in element.get("options", []))
                if element["type"] == "button" and not element["action_id"].endswith("|type"):
                    choices.append(element["text"]["text"])
    return as_read(" ".join(text)), choices, controls


class SlackDriver:
    name = "slack"

    def __init__(self, slack: Workspace) -> None:
        self.slack = slack
        self.stack = slack.stack

    def open(self, message: str, who: str) -> str:
        return self.slack.session_of(self.slack.mention(who, message))

    def cards(self, session_id: str) -> list[tuple[str, Message]]:
        """Each request the gateway posted for the session, with its message in Slack."""
        with self.stack.rt.db.read() as db:
            posts = db.execute(select(Post.key, Post.ref).where(
                Post.session_id == session_id, Post.key.startswith("request:")).order_by(Post.id)).all()
        found = []
        for key, ref in posts:
            channel, _, ts = str(ref).partition("|")
            found.append((key.removeprefix("request:"), self.slack.fake.message(channel, ts)))
        return found

    def shown(self, session_id: str) -> list[Shown]:
        return [Shown(request_id, *looks(card.now)) for request_id, card in self.cards(session_id)]

    def press(self, session_id: str, request_id: str, option_id: str, who: str) -> None:
        """Press the option on the card as it first appeared (a second press is a double click)."""
        card = dict(self.cards(session_id))[request_id]
        request = next(r for t in self.stack.history(session_id)["turns"] for r in t["requests"]
                       if r["requestId"] == request_id)
        label = next(o["label"] for o in request["options"] if o["id"] == option_id)
        self.slack.ok(self.slack.click(who, card, label, version=0))

    def type(self, session_id: str, text: str, who: str) -> None:
        with self.stack.rt.db.read() as db:
            where = Where.from_address(db.get_one(Session, session_id).address)
        self.slack.reply(who, text, where.thread_ts, where.channel_id)

    def told(self, session_id: str, who: str) -> list[str]:
        return [as_read(e.text) for e in self.slack.fake.ephemerals if e.user == USERS[who]]
