"""People using Slack against one gateway: what they do arrives as Slack sends it (signed events and
interactions, built from tests/fixtures/slack), and what they see is what the fake Slack Web API holds."""

from __future__ import annotations

import contextlib
import itertools
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select, text
from werkzeug.test import TestResponse

from engine.store.tables import Session
from tests.conftest import Stack, WorkerProcess, make_stack, worker_env
from tests.support.fake_slack import BOT_USER, TEAM, FakeSlack, Message
from tests.support.signing import slack_headers

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slack"
SECRET = "test-signing-secret"
TOKEN = "xoxb-test-token"
CHANNEL = "C0TEST"
USERS = {"alice": "UALICE", "bob": "UBOB", "carol": "UCAROL", "guest": "UGUEST"}
"""Slack user ids of the test people; a Slack client shows `<@UALICE>` as their name."""
PARTNER = "T0PARTNER"
TEAMS = {"alice": TEAM, "bob": TEAM, "carol": TEAM, "guest": PARTNER}
"""Each person's team: the guest is of another organization, in C0TEST as a Slack Connect channel."""


def fixture(name: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())
    return loaded


def slack_settings(fake: FakeSlack) -> dict[str, Any]:
    return {"slack_bot_token": TOKEN, "slack_signing_secret": SECRET, "slack_api_url": fake.url}


FAKE = pytest.StashKey[FakeSlack]()
WORKER = pytest.StashKey[tuple[WorkerProcess, str]]()


def shared_fake(request: pytest.FixtureRequest) -> FakeSlack:
    """One fake Slack Web API for the test session (a worker process started for it knows its URL)."""
    stash = request.config.stash
    if FAKE not in stash:
        stash[FAKE] = FakeSlack().start()
        request.session.addfinalizer(stash[FAKE].stop)
    return stash[FAKE]


def shared_worker(request: pytest.FixtureRequest, fake: FakeSlack) -> str:
    """One `hitl worker` with the Slack settings for the test session, on a queue of its own (whose name it
    returns: a queue no earlier run left jobs in)."""
    stash = request.config.stash
    if WORKER not in stash:
        queue = f"slack-{uuid.uuid4().hex[:12]}"
        env = worker_env(request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_url"), queue,
                         SLACK_BOT_TOKEN=TOKEN, SLACK_SIGNING_SECRET=SECRET, SLACK_API_URL=fake.url)
        log = request.getfixturevalue("tmp_path_factory").mktemp("slack-worker") / "worker.log"
        stash[WORKER] = (WorkerProcess(env, log), queue)
        request.session.addfinalizer(lambda: stash[WORKER][0].kill(15))  # before the database is dropped
    worker, queue = stash[WORKER]
    assert worker.proc.poll() is None, f"the Slack worker died:\n{worker.tail()}"
    return queue


@contextlib.contextmanager
def workspace(request: pytest.FixtureRequest, kind: str, tmp_path: Path, **settings: Any) -> Iterator[Workspace]:
    """A gateway with Slack configured ("sqlite": in-process jobs; "postgres": Redis and a real worker), with
    `settings` (Settings fields) of the web process besides."""
    fake = shared_fake(request)
    fake.reset()
    overrides = {**slack_settings(fake), **settings}
    if kind == "postgres":
        overrides["queue"] = shared_worker(request, fake)
    with make_stack(request, kind, tmp_path, **overrides) as stack:
        if kind == "postgres":
            fresh_job_ids(stack)
        yield Workspace(stack, fake)


def fresh_job_ids(stack: Stack) -> None:
    """RQ job ids are `<job>-<outbox id>`, kept in the whole Redis database: another test run (or the previous
    test, after `TRUNCATE ... RESTART IDENTITY`) finishing a job of the same id deletes ours, which then waits
    for a sweep. Outbox ids of this test start where nobody else's are."""
    with stack.rt.db.write() as db:
        db.execute(text("SELECT setval(pg_get_serial_sequence('outbox', 'id'), :start)"),
                   {"start": random.randrange(10**6, 10**15)})


class Workspace:
    """A Slack workspace whose people talk to the gateway: alice and bob in channel C0TEST, and in DMs."""

    def __init__(self, stack: Stack, fake: FakeSlack) -> None:
        self.stack, self.fake = stack, fake
        self.http = stack.app.test_client()
        self.clock = itertools.count(1)

    def next_ts(self) -> str:
        n = next(self.clock)
        return f"{1710000000 + n}.{n:06d}"

    # -- requests as Slack sends them --------------------------------------------------------------------

    def send_event(self, payload: dict[str, Any], **headers: str) -> TestResponse:
        body = json.dumps(payload)
        return self.http.post("/slack/events", data=body, headers={**slack_headers(SECRET, body), **headers})

    def send_interaction(self, payload: dict[str, Any]) -> TestResponse:
        body = urlencode({"payload": json.dumps(payload)})
        headers = slack_headers(SECRET, body, content_type="application/x-www-form-urlencoded")
        return self.http.post("/slack/interactions", data=body, headers=headers)

    def event(self, name: str, who: str, text: str, thread_ts: str | None = None, channel: str = CHANNEL,
              **fields: Any) -> dict[str, Any]:
        """The `name` fixture as `who` writing `text` now (a new ts and event id)."""
        payload = fixture(name)
        ts = self.next_ts()
        payload["event_id"] = f"Ev{ts.replace('.', '')}"
        payload["event"].update(user=USERS[who], text=text, ts=ts, event_ts=ts, channel=channel, **fields)
        if TEAMS[who] != TEAM:  # Slack Connect: the writer's own team, in a channel shared outside
            payload["event"]["user_team"] = TEAMS[who]
            payload["is_ext_shared_channel"] = True
        payload["event"].pop("thread_ts", None)
        if thread_ts is not None:
            payload["event"]["thread_ts"] = thread_ts
        return payload

    # -- what people do ----------------------------------------------------------------------------------

    def mention(self, who: str, text: str, thread_ts: str | None = None) -> dict[str, Any]:
        """`who` mentions the bot (in a thread, or starting one); returns the event."""
        payload = self.event("app_mention", who, f"<@{BOT_USER}> {text}", thread_ts)
        self.ok(self.send_event(payload))
        return dict(payload["event"])

    def reply(self, who: str, text: str, thread_ts: str, channel: str = CHANNEL) -> None:
        self.ok(self.send_event(self.event("message", who, text, thread_ts, channel)))

    def click(self, who: str, card: Message, label: str, version: int = -1) -> TestResponse:
        """`who` presses the control labelled `label` on the card as it looked at `version` (default: now)."""
        payload = self.click_payload(who, card, label, version)
        return self.send_interaction(payload)

    def click_payload(self, who: str, card: Message, label: str, version: int = -1) -> dict[str, Any]:
        blocks = card.versions[version]["blocks"]
        payload = fixture("block_actions")
        payload["user"].update(id=USERS[who], username=who, name=who, team_id=TEAMS[who])
        payload["container"].update(message_ts=card.ts, channel_id=card.channel)
        payload["channel"]["id"] = card.channel
        payload["message"].update(ts=card.ts, blocks=blocks, thread_ts=card.thread_ts)
        payload["actions"] = [action(blocks, label, self.next_ts())]
        return payload

    def submit_answer(self, who: str, view: dict[str, Any], text: str) -> TestResponse:
        """`who` types `text` into the modal `view` (what views.open showed) and presses Send."""
        payload = fixture("view_submission")
        payload["user"].update(id=USERS[who], username=who, name=who, team_id=TEAMS[who])
        block = next(b for b in view["blocks"] if b["type"] == "input")
        payload["view"].update(callback_id=view["callback_id"], private_metadata=view["private_metadata"],
                               blocks=view["blocks"], id=f"V{self.next_ts().replace('.', '')}",
                               state={"values": {block["block_id"]: {block["element"]["action_id"]: {
                                   "type": "plain_text_input", "value": text}}}})
        return self.send_interaction(payload)

    def submit_edit(self, who: str, view: dict[str, Any], changes: dict[str, str | bool]) -> TestResponse:
        """`who` changes fields of the "Edit" modal `view` (by property name: a text, an option's value, a
        checkbox ticked or not) and presses Approve; Slack sends every input as it then is."""
        values = {}
        for block in (b for b in view["blocks"] if b["type"] == "input"):
            element, name = block["element"], block["block_id"].removeprefix("field|")
            values[block["block_id"]] = {element["action_id"]: modal_value(element, changes.get(name))}
        payload = fixture("view_submission")
        payload["user"].update(id=USERS[who], username=who, name=who, team_id=TEAMS[who])
        payload["view"].update(callback_id=view["callback_id"], private_metadata=view["private_metadata"],
                               blocks=view["blocks"], id=f"V{self.next_ts().replace('.', '')}",
                               state={"values": values})
        return self.send_interaction(payload)

    # -- what they see -----------------------------------------------------------------------------------

    def thread(self, event: dict[str, Any]) -> list[Message]:
        """What the bot posted in the thread a mention started (or was in)."""
        return self.fake.thread(event["channel"], event.get("thread_ts") or event["ts"])

    def cards(self, event: dict[str, Any]) -> list[Message]:
        return [m for m in self.thread(event) if m.versions[0]["blocks"]]

    def session_of(self, event: dict[str, Any]) -> str:
        """The session a mention started (or continued)."""
        address = f"slack::{event['channel']}:{event.get('thread_ts') or event['ts']}"
        with self.stack.rt.db.read() as db:
            return str(db.execute(select(Session.id).where(Session.address == address)).scalar_one())

    def ok(self, response: TestResponse) -> None:
        assert response.status_code == 200, response.get_data(as_text=True)
        self.wait_idle()

    def wait_idle(self) -> None:
        """Wait until every stored item was applied, every job ran and every event reached Slack."""
        self.stack.wait_idle()


def modal_value(element: dict[str, Any], changed: str | bool | None) -> dict[str, Any]:
    """An input's state in a view_submission: as the modal showed it, or `changed`."""
    kind = element["type"]
    if kind == "checkboxes":
        ticked = bool(element.get("initial_options")) if changed is None else changed
        return {"type": kind, "selected_options": element["options"] if ticked else []}
    if kind == "static_select":
        chosen = element.get("initial_option") if changed is None else next(
            o for o in element["options"] if o["value"] == changed)
        return {"type": kind, "selected_option": chosen}
    return {"type": kind, "value": element.get("initial_value") if changed is None else changed}


def action(blocks: list[dict[str, Any]], label: str, action_ts: str) -> dict[str, Any]:
    """The `actions[0]` Slack sends when the control labelled `label` is used."""
    for block in blocks:
        for element in block.get("elements", []) if block["type"] == "actions" else []:
            common = {"action_id": element["action_id"], "block_id": "blk", "action_ts": action_ts}
            if element["type"] == "button" and element["text"]["text"] == label:
                return {**common, "type": "button", "text": element["text"], "value": element["value"]}
            for option in element.get("options", []):
                if option["text"]["text"] == label:
                    return {**common, "type": "static_select", "selected_option": option,
                            "placeholder": element["placeholder"]}
    raise AssertionError(f"no control labelled {label!r} on the card")
