"""Property: whatever a platform's signing key signs, each webhook route answers without a server error (a 2xx, a
400, a 404), on PostgreSQL. Bodies are random bytes, random JSON, random forms, and each platform's real payloads
with random values put in anywhere (text with NUL and lone surrogates, ids of the wrong type, nesting)."""

from __future__ import annotations

import copy
import json
import os
from typing import Any
from urllib.parse import urlencode

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.github.support import ALICE, Github, comment_event
from tests.github.support import fixture as github_fixture
from tests.slack.workspace import SECRET as SLACK_SECRET
from tests.slack.workspace import Workspace
from tests.slack.workspace import fixture as slack_fixture
from tests.support.signing import slack_headers
from tests.twilio.fake_api import fixture as twilio_fixture
from tests.twilio.support import Sms

EXAMPLES = settings(max_examples=int(os.environ.get("HITL_FUZZ_EXAMPLES", "100")), deadline=None,
                    derandomize=not os.environ.get("HITL_FUZZ_RANDOM"),
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
"""Bounded, and the same examples every run (a failure found once is found again); HITL_FUZZ_EXAMPLES=1000
HITL_FUZZ_RANDOM=1 searches wider, with fresh examples each run."""

ANY_CHARACTER = st.characters(exclude_categories=())
"""NUL and lone surrogates included (Hypothesis leaves surrogates out unless told)."""
TEXT = st.text(ANY_CHARACTER, max_size=30)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=4), max_leaves=12)
FORM_TEXT = st.text(max_size=30)
"""A form's text: NUL included, surrogates not (a form is UTF-8 bytes, which cannot hold them)."""
FORM = st.dictionaries(FORM_TEXT, FORM_TEXT, max_size=8)
HEADER = st.text(st.characters(min_codepoint=32, max_codepoint=126), min_size=1, max_size=40)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a JSON value (its root, each key's value, each item)."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += paths(item, (*prefix, index))
    return found


def put(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    changed = copy.copy(value)
    changed[path[0]] = put(value[path[0]], path[1:], new)
    return changed


def mutated(payloads: list[dict[str, Any]]) -> st.SearchStrategy[Any]:
    """A real payload with up to three of its values (or whole parts) replaced by random JSON."""
    def changes(payload: dict[str, Any]) -> st.SearchStrategy[Any]:
        edits = st.lists(st.tuples(st.sampled_from(paths(payload)[1:]), JSON), max_size=3)
        return edits.map(lambda chosen: apply(payload, chosen))
    return st.sampled_from(payloads).flatmap(changes)


def apply(payload: Any, edits: list[tuple[tuple[Any, ...], Any]]) -> Any:
    for path, new in edits:
        try:
            payload = put(payload, path, new)
        except (KeyError, IndexError, TypeError):  # an earlier edit replaced what this path went through
            pass
    return payload


def dumps(value: Any) -> bytes:
    return json.dumps(value).encode()


def assert_no_server_error(status: int, body: bytes) -> None:
    assert status < 500, body[:500]


# -- Slack -----------------------------------------------------------------------------------------------


def slack_payloads() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(events, interactions): every fixture's shape, with this gateway's controls and modal."""
    events = [slack_fixture(name) for name in ("app_mention", "message", "message_im", "message_file_share",
                                               "url_verification", "app_uninstalled")]
    click = slack_fixture("block_actions")
    click["actions"][0].update(action_id="hitl|req_x|1", value="1")
    typed = slack_fixture("view_submission")
    typed["view"].update(callback_id="hitl|answer", private_metadata="req_x|C0TEST",
                         state={"values": {"answer": {"text": {"type": "plain_text_input", "value": "hi"}}}})
    org_click = slack_fixture("block_actions_org_wide")
    org_click["actions"][0].update(action_id="hitl|req_x|type")
    return events, [click, typed, org_click]


EVENTS, INTERACTIONS = slack_payloads()


@EXAMPLES
@given(body=st.binary(max_size=300) | JSON.map(dumps) | mutated(EVENTS).map(dumps))
def test_signed_slack_events_never_fail(slack_on_postgres: Workspace, body: bytes) -> None:
    response = slack_on_postgres.http.post("/slack/events", data=body, headers=slack_headers(SLACK_SECRET, body))
    assert_no_server_error(response.status_code, response.get_data())


FORM_TYPE = "application/x-www-form-urlencoded"


@EXAMPLES
@given(body=st.binary(max_size=300) | FORM.map(urlencode).map(str.encode)
       | (JSON | mutated(INTERACTIONS)).map(lambda payload: urlencode({"payload": json.dumps(payload)}).encode()))
def test_signed_slack_interactions_never_fail(slack_on_postgres: Workspace, body: bytes) -> None:
    response = slack_on_postgres.http.post("/slack/interactions", data=body,
                                           headers=slack_headers(SLACK_SECRET, body, content_type=FORM_TYPE))
    assert_no_server_error(response.status_code, response.get_data())


# -- Twilio ----------------------------------------------------------------------------------------------


def incoming(fields: dict[str, str]) -> dict[str, str]:
    """Twilio's incoming SMS from alice (on the allow list), with `fields` changed."""
    return {**twilio_fixture("incoming_sms.json"), "From": "+15550001111", "To": "+15550001000", **fields}


SMS_FIELDS = st.dictionaries(st.sampled_from(sorted(incoming({}))), FORM_TEXT, max_size=3)


@EXAMPLES
@given(body=st.binary(max_size=300) | FORM.map(urlencode).map(str.encode)
       | SMS_FIELDS.map(incoming).map(urlencode).map(str.encode))
def test_signed_twilio_webhooks_never_fail(sms_on_postgres: Sms, body: bytes) -> None:
    """Signed over the form as the gateway reads it (Twilio signs the fields it sent)."""
    response = sms_on_postgres.post_body(body)
    assert_no_server_error(response.status_code, response.get_data())


# -- GitHub ----------------------------------------------------------------------------------------------


COMMENTS = [comment_event("@hitl-bot hello", ALICE, 7), comment_event("/approve", ALICE, 8), github_fixture("ping")]


@EXAMPLES
@given(body=st.binary(max_size=300) | JSON.map(dumps) | mutated(COMMENTS).map(dumps),
       event=st.sampled_from(["issue_comment", "ping", "push"]) | HEADER, delivery=HEADER)
def test_signed_github_deliveries_never_fail(github_on_postgres: Github, body: bytes, event: str,
                                             delivery: str) -> None:
    response = github_on_postgres.deliver(body, event=event, delivery=delivery)
    assert_no_server_error(response.status_code, response.get_data())
