"""Bad input on the channels, on PostgreSQL: text a database cannot store arrives without those characters (never
lost), and a signed body that does not parse is a 400 that changes nothing (never a 500)."""

from __future__ import annotations

import json
from urllib.parse import urlencode

import pytest
from sqlalchemy import func, select

from engine.store.tables import Inbound, Outbox, Session, Turn
from tests.conftest import Stack
from tests.github.support import ALICE, BOT, Github, comment_event
from tests.slack.workspace import SECRET as SLACK_SECRET
from tests.slack.workspace import Workspace
from tests.slack.workspace import fixture as slack_fixture
from tests.support.signing import slack_headers
from tests.twilio.support import ALICE as ALICE_PHONE
from tests.twilio.support import Sms

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


def test_a_slack_dm_with_a_nul_arrives_without_it(slack_on_postgres: Workspace) -> None:
    slack = slack_on_postgres
    slack.ok(slack.send_event(slack.event("message_im", "alice", BROKEN, channel="D0ALICE")))
    assert messages(slack.stack) == [KEPT]
    assert [m.now["text"] for m in slack.fake.messages] == [f"noted: {KEPT}"]


def test_a_click_whose_platform_id_is_longer_than_its_column_is_kept(slack_on_postgres: Workspace) -> None:
    """A click's id (action_ts:user:action_id) can pass the 200 characters `inbound.external_id` holds: it is
    stored as its digest, once."""
    slack = slack_on_postgres
    payload = slack_fixture("block_actions")
    payload["actions"][0].update(action_id="hitl|req_" + "x" * 230 + "|1", value="1")
    for _ in range(2):
        slack.ok(slack.send_interaction(payload))
    with slack.stack.rt.db.read() as db:
        [external_id] = db.execute(select(Inbound.external_id)).scalars().all()
    assert external_id.startswith("sha256:")


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
def test_a_signed_slack_event_that_does_not_parse_is_a_400(slack_on_postgres: Workspace, body: bytes) -> None:
    slack = slack_on_postgres
    response = slack.http.post("/slack/events", data=body, headers=slack_headers(SLACK_SECRET, body))
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "invalid_payload"
    slack.wait_idle()
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
def test_a_signed_slack_interaction_that_does_not_parse_is_a_400(slack_on_postgres: Workspace, body: bytes) -> None:
    slack = slack_on_postgres
    headers = slack_headers(SLACK_SECRET, body, content_type="application/x-www-form-urlencoded")
    response = slack.http.post("/slack/interactions", data=body, headers=headers)
    assert response.status_code == 400, response.get_data(as_text=True)
    slack.wait_idle()
    assert counts(slack.stack) == NOTHING


# -- Twilio ----------------------------------------------------------------------------------------------


def test_an_sms_with_a_nul_arrives_without_it(sms_on_postgres: Sms) -> None:
    sms = sms_on_postgres
    sms.text(ALICE_PHONE, "fix the\x00 build now", MessageSid="SM\x00" + "0" * 32)
    assert messages(sms.stack) == [KEPT]
    assert sms.inbox(ALICE_PHONE) == [f"noted: {KEPT}"]


@pytest.mark.parametrize("body", [
    pytest.param(b"", id="an empty form"),
    pytest.param(urlencode({"Body": "approve", "From": ALICE_PHONE}).encode(), id="a form without required fields"),
    pytest.param(b"Body=\xff\xfe&From=%2B15550001111", id="not UTF-8"),
    pytest.param(DEEP, id="JSON nested 50,000 deep"),
])
def test_a_signed_sms_webhook_that_does_not_parse_is_a_400(sms_on_postgres: Sms, body: bytes) -> None:
    sms = sms_on_postgres
    assert sms.post_body(body).status_code == 400
    sms.wait()
    assert counts(sms.stack) == NOTHING


# -- GitHub ----------------------------------------------------------------------------------------------


def test_a_github_comment_with_a_nul_arrives_without_it(github_on_postgres: Github) -> None:
    github = github_on_postgres
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
def test_a_signed_github_delivery_that_does_not_parse_is_a_400(github_on_postgres: Github, body: bytes) -> None:
    github = github_on_postgres
    response = github.deliver(body)
    assert response.status_code == 400, response.get_data(as_text=True)
    assert response.get_json()["error"]["code"] == "invalid_delivery"
    github.wait_idle()
    assert counts(github.stack) == NOTHING

