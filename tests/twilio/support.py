"""The SMS test set-up shared by tests/twilio and the contract driver: numbers, the fake REST API, stacks
configured for Twilio (with a worker of their own on PostgreSQL), and a phone that texts the gateway."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from sqlalchemy import select
from werkzeug.test import TestResponse

from engine.store.tables import Session
from tests.conftest import Stack, WorkerProcess, make_stack, worker_env
from tests.support.signing import twilio_signature
from tests.twilio.fake_api import FakeTwilio, fixture

ACCOUNT_SID = "AC00000000000000000000000000000000"
AUTH_TOKEN = "test-twilio-auth-token"
OURS = "+15550001000"
ALICE, BOB, CAROL = "+15550001111", "+15550002222", "+15550003333"
PHONES = {"alice": ALICE, "bob": BOB}
ALLOW_FROM = f"alice={ALICE},bob={BOB}"
"""CAROL is a real phone, but not on the allow list."""
WHATSAPP = "whatsapp:"
PUBLIC_BASE_URL = "https://hitl.example.com"
WEBHOOK_URL = PUBLIC_BASE_URL + "/twilio/sms"

_shared: dict[str, Any] = {}
"""One fake API and one PostgreSQL worker per test run, shared by every Twilio test and driver."""


def twilio_env(api_url: str) -> dict[str, str]:
    return {"TWILIO_ACCOUNT_SID": ACCOUNT_SID, "TWILIO_AUTH_TOKEN": AUTH_TOKEN, "TWILIO_FROM": OURS,
            "TWILIO_ALLOW_FROM": ALLOW_FROM, "PUBLIC_BASE_URL": PUBLIC_BASE_URL, "TWILIO_API_URL": api_url}


def twilio_settings(api_url: str) -> dict[str, Any]:
    return {"twilio_account_sid": ACCOUNT_SID, "twilio_auth_token": AUTH_TOKEN, "twilio_from": OURS,
            "twilio_allow_from": ALLOW_FROM.split(","), "public_base_url": PUBLIC_BASE_URL,
            "twilio_api_url": api_url}


def fake_twilio(request: pytest.FixtureRequest) -> FakeTwilio:
    if "fake" not in _shared:
        _shared["fake"] = FakeTwilio()
        request.config.add_cleanup(lambda: _shared.pop("fake").close())
    fake: FakeTwilio = _shared["fake"]
    return fake


def twilio_queue(request: pytest.FixtureRequest) -> str:
    """The queue of a `hitl worker` that has the Twilio settings (the session's shared worker has none)."""
    if "worker" not in _shared:
        queue = f"twilio-{uuid.uuid4().hex[:12]}"
        env = worker_env(request.getfixturevalue("postgres_url"), request.getfixturevalue("redis_url"), queue,
                         **twilio_env(fake_twilio(request).url))
        log = request.getfixturevalue("tmp_path_factory").mktemp("twilio-worker") / "worker.log"
        _shared["worker"] = (queue, WorkerProcess(env, log))
        request.config.add_cleanup(lambda: _shared.pop("worker")[1].kill(15))
    queue, worker = _shared["worker"]
    assert worker.proc.poll() is None, f"the Twilio worker died:\n{worker.tail()}"
    return str(queue)


@contextmanager
def twilio_stack(request: pytest.FixtureRequest, kind: str, tmp_path: Path, **settings: Any) -> Iterator[Sms]:
    """A stack with the SMS channel on (SQLite with in-process jobs, or PostgreSQL with a Twilio worker)."""
    fake = fake_twilio(request)
    fake.reset()
    overrides = {**twilio_settings(fake.url), **settings}
    if kind == "postgres":
        overrides["queue"] = twilio_queue(request)
    with make_stack(request, kind, tmp_path, **overrides) as stack:
        yield Sms(stack, fake)


class Sms:
    """People texting the gateway's webhook, and what the gateway texted back (through the fake API)."""

    def __init__(self, stack: Stack, fake: FakeTwilio) -> None:
        self.stack, self.fake = stack, fake
        self.client = stack.app.test_client()

    def post(self, form: dict[str, str], signature: str | None = None, url: str = WEBHOOK_URL,
             headers: dict[str, str] | None = None) -> TestResponse:
        """Post `form` to /twilio/sms as Twilio does (URL-encoded), signed for `url` unless a signature is given."""
        signature = signature if signature is not None else twilio_signature(AUTH_TOKEN, url, form)
        return self.client.post("/twilio/sms", data=urlencode(form), content_type="application/x-www-form-urlencoded",
                                headers={"X-Twilio-Signature": signature, **(headers or {})})

    def post_body(self, body: bytes) -> TestResponse:
        """POST raw `body` (a form, or anything) signed over the form the gateway reads from it, as Twilio signs
        the fields it sent."""
        with self.stack.app.test_request_context("/twilio/sms", method="POST", data=body,
                                                 content_type="application/x-www-form-urlencoded") as context:
            form = context.request.form.to_dict(flat=False)
        return self.client.post("/twilio/sms", data=body, content_type="application/x-www-form-urlencoded",
                                headers={"X-Twilio-Signature": twilio_signature(AUTH_TOKEN, WEBHOOK_URL, form)})

    def form(self, sender: str, body: str, **fields: str) -> dict[str, str]:
        """An incoming-message webhook as Twilio sends it (every documented field), with a fresh MessageSid;
        from a `whatsapp:` sender, a WhatsApp message to our number's WhatsApp sender."""
        sid = f"SM{uuid.uuid4().hex}"
        if sender.startswith(WHATSAPP):
            return {**fixture("incoming_whatsapp.json"), "MessageSid": sid, "SmsSid": sid, "SmsMessageSid": sid,
                    "From": sender, "To": WHATSAPP + OURS, "WaId": sender.removeprefix(WHATSAPP + "+"),
                    "Body": body, **fields}
        return {**fixture("incoming_sms.json"), "MessageSid": sid, "SmsSid": sid, "SmsMessageSid": sid,
                "From": sender, "To": OURS, "Body": body, **fields}

    def text(self, sender: str, body: str, **fields: str) -> TestResponse:
        """`sender` texts `body` to our number; waits until the gateway has done everything it leads to."""
        response = self.post(self.form(sender, body, **fields))
        assert response.status_code == 200, response.status_code
        self.wait()
        return response

    def wait(self, timeout: float = 60.0) -> None:
        """Until every job has run: inbound items, turns and deliveries."""
        self.stack.wait_idle(timeout)

    def inbox(self, number: str) -> list[str]:
        """What the gateway texted `number`, oldest first."""
        return self.fake.to(number)

    def session_at(self, number: str) -> str:
        """The latest session with `number` (a `whatsapp:` one talks to our number's WhatsApp sender)."""
        ours = WHATSAPP + OURS if number.startswith(WHATSAPP) else OURS
        with self.stack.rt.db.read() as db:
            return str(db.execute(select(Session.id).where(Session.address == f"twilio:{ours}:{number}")
                                  .order_by(Session.created_at.desc()).limit(1)).scalar_one())
