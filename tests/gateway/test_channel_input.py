"""Bad input on the channels, on PostgreSQL: text a database cannot store arrives without those characters (never
lost), and a signed body that does not parse is a 400 that changes nothing (never a 500)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select

from engine.tables import Inbound, Outbox, Session, Turn
from tests.conftest import Stack
from tests.github.support import ALICE, BOT, Github, comment_event, github_stack
from tests.slack.workspace import SECRET as SLACK_SECRET
from tests.slack.workspace import Workspace, workspace
from tests.support.signing import slack_headers, twilio_signature
from tests.twilio.support import ALICE as ALICE_PHONE
from tests.twilio.support import AUTH_TOKEN, WEBHOOK_URL, Sms, twilio_stack

BROKEN = "fix the\x00 build\ud800 now"
"""A NUL and a lone surrogate (JSON's `\\u0000` and `\\ud800`): neither can be stored."""
KEPT = "fix the build now"
DEEP = b"[" * 50_000 + b"]" * 50_000


def counts(stack: Stack) -> dict[str, int]:
    with stack.rt.db.read() as db:
        return {table.__tablename__: db.execute(select(func.count()).select_from(table)).scalar_one()
                for table in (Inbound, Outbox, Session, Turn)}


NOTHING = {"inbound": 0, "outbox": 0, "sessions": 0, "turns": 0}


def messages(stack: Stack) -> list[str]:
    with stack.rt.db.read() as db:
        [session] = db.execute(select(Session.id)).scalars().all()
    return [e["data"]["text"] for e in stack.events(session) if e["type"] == "message.received"]


# -- Slack -----------------------------------------------------------------------------------------------


@pytest.fixture
def slack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Workspace]:
    with workspace(request, "postgres", tmp_path) as built:
        yield built


def test_a_slack_dm_with_a_nul_arrives_without_it(slack: Workspace) -> None:
    slack.ok(slack.send_event(slack.event("message_im", "alice", BROKEN, channel="D0ALICE")))
    assert messages(slack.stack) == [KEPT]
    assert [m.now["text"] for m in slack.fake.messages] == [f"noted: {KEPT}"]


SLACK_BODIES = [
    pytest.param(b"[1, 2]", id="a JSON array"),
    pytest.param(b'"a string"', id="a JSON string"),
    pytest.param(b"null", id="JSON null"),
    pytest.param(DEEP, id="JSON nested 50,000 deep"),
    pytest.param(b'{"type": "event_callback", "event": "\xff\xfe"}', id="not UTF-8"),
    pytest.param(json.dumps({"type": "event_callback", "event_id": "Ev1", "event": None}).encode(),
                 id="an envelope whose event is null"),
    pytest.param(json.dumps({"type": "event_callback", "event_id": "Ev1", "authorizations": [None],
                             "event": {"type": "app_mention"}}).encode(), id="an authorization that is null"),
    pytest.param(json.dumps({"type": "event_callback", "event_id": "Ev1", "event": {
        "type": "app_mention", "channel": "C0TEST\x00", "user": "UALICE", "ts": "1.2", "text": "<@UBOT> hi"}}
    ).encode(), id="a channel id with a NUL"),
]


@pytest.mark.parametrize("body", SLACK_BODIES)
def test_a_signed_slack_event_that_does_not_parse_is_a_400(slack: Workspace, body: bytes) -> None:
    response = slack.http.post("/slack/events", data=body, headers=slack_headers(SLACK_SECRET, body))
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "invalid_payload"
    slack.settle()
    assert counts(slack.stack) == NOTHING


def interaction(payload: bytes) -> bytes:
    return b"payload=" + payload.replace(b"%", b"%25").replace(b"&", b"%26").replace(b"+", b"%2B")


@pytest.mark.parametrize("body", [
    *(pytest.param(interaction(p.values[0]), id=p.id) for p in SLACK_BODIES[:5]),  # type: ignore[index]
    pytest.param(interaction(json.dumps({"type": "block_actions", "user": {"id": "UALICE"}, "actions": []})
                             .encode()), id="a click without actions"),
    pytest.param(interaction(json.dumps({"type": "block_actions", "user": {"id": "UALICE"},
                                         "actions": [{"value": "1"}]}).encode()), id="an action without its id"),
    pytest.param(interaction(json.dumps({"type": "block_actions", "user": {"id": "UALICE", "team_id": "T0TEST"},
                                         "actions": [{"action_id": ["hitl|req_x|1"], "action_ts": "1.2"}]})
                             .encode()), id="an action id that is a list"),
])
def test_a_signed_slack_interaction_that_does_not_parse_is_a_400(slack: Workspace, body: bytes) -> None:
    headers = slack_headers(SLACK_SECRET, body, content_type="application/x-www-form-urlencoded")
    response = slack.http.post("/slack/interactions", data=body, headers=headers)
    assert response.status_code == 400, response.get_data(as_text=True)
    slack.settle()
    assert counts(slack.stack) == NOTHING


# -- Twilio ----------------------------------------------------------------------------------------------


@pytest.fixture
def sms(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Sms]:
    with twilio_stack(request, "postgres", tmp_path) as built:
        yield built


def test_an_sms_with_a_nul_arrives_without_it(sms: Sms) -> None:
    sms.text(ALICE_PHONE, "fix the\x00 build now", MessageSid="SM\x00" + "0" * 32)
    assert messages(sms.stack) == [KEPT]
    assert sms.inbox(ALICE_PHONE) == [f"noted: {KEPT}"]


def post_form(sms: Sms, body: bytes) -> int:
    """POST `body` signed over the form the gateway reads from it."""
    with sms.stack.app.test_request_context("/twilio/sms", method="POST", data=body,
                                            content_type="application/x-www-form-urlencoded") as context:
        form = context.request.form.to_dict(flat=False)
    return sms.client.post("/twilio/sms", data=body, content_type="application/x-www-form-urlencoded", headers={
        "X-Twilio-Signature": twilio_signature(AUTH_TOKEN, WEBHOOK_URL, form)}).status_code


@pytest.mark.parametrize("body", [
    pytest.param(b"", id="an empty form"),
    pytest.param(urlencode({"Body": "approve", "From": ALICE_PHONE}).encode(), id="a form without required fields"),
    pytest.param(b"Body=\xff\xfe&From=%2B15550001111", id="not UTF-8"),
    pytest.param(DEEP, id="JSON nested 50,000 deep"),
])
def test_a_signed_sms_webhook_that_does_not_parse_is_a_400(sms: Sms, body: bytes) -> None:
    assert post_form(sms, body) == 400
    sms.wait()
    assert counts(sms.stack) == NOTHING


# -- GitHub ----------------------------------------------------------------------------------------------


@pytest.fixture
def github(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Github]:
    with github_stack(request, "postgres", tmp_path) as built:
        yield built


def test_a_github_comment_with_a_nul_arrives_without_it(github: Github) -> None:
    github.comment(ALICE, f"@{BOT} fix the\x00 build now")
    assert messages(github.stack) == [KEPT]
    assert github.said() == [f"noted: {KEPT}"]


@pytest.mark.parametrize("body", [
    pytest.param(b"[1, 2]", id="a JSON array"),
    pytest.param(b'"a string"', id="a JSON string"),
    pytest.param(DEEP, id="JSON nested 50,000 deep"),
    pytest.param(b'{"action": "created", "comment": "\xff\xfe"}', id="not UTF-8"),
    pytest.param(b'{"action": "created"}', id="a comment event without its comment"),
    pytest.param(json.dumps(comment_event(f"@{BOT} \ud800", ALICE, 7)).encode(),
                 id="a lone surrogate (GitHub writes UTF-8, which has none)"),
])
def test_a_signed_github_delivery_that_does_not_parse_is_a_400(github: Github, body: bytes) -> None:
    response = github.deliver(body)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "invalid_delivery"
    github.settle()
    assert counts(github.stack) == NOTHING

