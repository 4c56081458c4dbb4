"""SMS as the contract driver: people text the webhook from their phones; what is shown is what was texted.

An SMS thread joins one phone to our number, so a session belongs to the phone that opened it. Its person
presses an option by texting its number and types by texting. Someone else cannot text into that thread at
all: a person who is not on it answers where they can, in the console (the REST API), and is told there.
The channel shows one request at a time: a press on a request still waiting behind the shown one is kept,
like a person who decided early, and texted when that request's prompt arrives.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import select

from adapters.twilio.render import render_confirmation
from engine.answers.input_requests import request_out
from engine.store.tables import InputRequest, Post, Session
from tests.contract.driver import Shown
from tests.twilio.support import PHONES, Sms, twilio_stack

CHOICE = re.compile(r"^(\d+)\. (.+)$")


@contextmanager
def driver(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[TwilioDriver]:
    with twilio_stack(request, kind, tmp_path) as sms:
        yield TwilioDriver(sms)


class TwilioDriver:
    name = "twilio"

    def __init__(self, sms: Sms) -> None:
        self.sms, self.stack = sms, sms.stack
        self.decided: dict[str, str] = {}  # request id -> option id, pressed before its prompt arrived
        self.refusals: dict[str, list[str]] = {}  # what the console told people who are not on the thread

    def open(self, message: str, who: str) -> str:
        self.sms.text(PHONES[who], message)
        return self.sms.session_at(PHONES[who])

    def ask(self, message: str, who: str) -> str:
        created = self.stack.client(who).post("/api/sessions", json={
            "message": message, "channel": "twilio", "address": {"to": PHONES[who]}})
        assert created.status_code == 201, created.get_json()
        self.sms.wait()
        return str(created.get_json()["id"])

    def said(self, session_id: str) -> list[str]:
        with self.stack.rt.db.read() as db:
            _, theirs = db.get_one(Session, session_id).address.rsplit(":", 1)
        return self.sms.inbox(theirs)

    def shown(self, session_id: str) -> list[Shown]:
        """Each prompt texted for the session, followed by its confirmation once that was texted too."""
        shown = []
        for post in self.posts(session_id):
            if not post.key.startswith("request:") or post.ref is None:
                continue
            prompt = self.sms.fake.by_sid(post.ref)
            with self.stack.rt.db.read() as db:  # as it stands (a phone's session is no API key's to read)
                request = request_out(db.get_one(InputRequest, post.key.removeprefix("request:")))
            confirmation = render_confirmation(request) if request.status == "resolved" else None
            texted = confirmation in self.sms.fake.after(prompt.sid)
            choices = [m[2] for line in prompt.body.split("\n") if (m := CHOICE.match(line))]
            text = prompt.body + (f"\n{confirmation}" if texted else "")
            shown.append(Shown(request.request_id, text, choices, open=not texted))
        return shown

    def press(self, session_id: str, request_id: str, option_id: str, who: str) -> None:
        if not self.on_thread(session_id, who):
            response = self.stack.client(who).patch(f"/api/requests/{request_id}", json={"optionId": option_id})
            if response.status_code in (403, 404):  # refused, or (another's) not theirs to see
                self.refusals.setdefault(who, []).append(response.get_json()["error"]["message"])
            self.sms.wait()
            return
        current = self.current(session_id)
        if current is not None and current != request_id and self.is_open(request_id):
            self.decided[request_id] = option_id  # not on screen yet: answer it when it is
            return
        self.sms.text(PHONES[who], self.number_of(request_id, option_id))
        while (current := self.current(session_id)) in self.decided:
            self.sms.text(PHONES[who], self.number_of(current, self.decided.pop(current)))

    def type(self, session_id: str, text: str, who: str) -> None:
        if self.on_thread(session_id, who):
            self.sms.text(PHONES[who], text)
            return
        response = self.stack.client(who).post(f"/api/sessions/{session_id}/input", json={"message": text})
        for result in response.get_json().get("results", []):
            if result["status"] == "refused":
                self.refusals.setdefault(who, []).append(result["reason"])
        self.sms.wait()

    def told(self, session_id: str, who: str) -> list[str]:
        """Refusals texted to `who`'s phone about this session, and what the console told them."""
        refusals = {f"event:{e['seq']}" for e in self.stack.events(session_id)
                    if e["type"] == "approval.candidate" and e["data"]["outcome"] == "rejected"}
        texted = [self.sms.fake.by_sid(post.ref) for post in self.posts(session_id)
                  if post.key in refusals and post.ref is not None]
        return [sent.body for sent in texted if sent.to == PHONES[who]] + self.refusals.get(who, [])

    # -- reading the thread -------------------------------------------------------------------------------

    def posts(self, session_id: str) -> list[Post]:
        with self.stack.rt.db.read() as db:
            return list(db.execute(select(Post).where(Post.session_id == session_id).order_by(Post.id)).scalars())

    def current(self, session_id: str) -> str | None:
        """The request whose prompt is on screen, awaiting an answer."""
        return next((s.request_id for s in self.shown(session_id) if s.open), None)

    def on_thread(self, session_id: str, who: str) -> bool:
        with self.stack.rt.db.read() as db:
            return db.get_one(Session, session_id).address.endswith(f":{PHONES[who]}")

    def is_open(self, request_id: str) -> bool:
        with self.stack.rt.db.read() as db:
            return db.get_one(InputRequest, request_id).status == "pending"

    def number_of(self, request_id: str, option_id: str) -> str:
        with self.stack.rt.db.read() as db:
            options = [o["id"] for o in db.get_one(InputRequest, request_id).options]
        return str(options.index(option_id) + 1)
