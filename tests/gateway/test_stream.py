"""The live event stream (SSE) over a real HTTP server, on SQLite in-process and on PostgreSQL + an RQ worker."""

from __future__ import annotations

import argparse
import json
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
from werkzeug.serving import make_server

from gateway import cli, stream
from tests.conftest import KEYS, Stack, sqlite_settings
from tests.support.agent import script
from tests.support.live_server import live_server

SSE = {"Accept": "text/event-stream"}
ALICE = {"Authorization": f"Bearer {KEYS['alice']}"}
REFUND = script([("lookup", {"order_id": "o-1"}), ("refund", {"charge_id": "ch_1", "amount": 20.0})],
                final="refunded")


@pytest.fixture
def server(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The stack's app on a real port; a short heartbeat, so streams notice a closed client quickly."""
    monkeypatch.setattr(stream, "HEARTBEAT_SECONDS", 0.2)
    with live_server(stack.app) as url:
        yield url


class EventStream:
    """Reads SSE frames off a streaming response: `{"id", "event", "data"}` or `{"comment"}`."""

    def __init__(self, response: requests.Response) -> None:
        self.lines = response.iter_lines(decode_unicode=True)

    def frame(self) -> dict[str, str]:
        fields: dict[str, str] = {}
        for line in self.lines:
            if line == "":
                if fields:
                    return fields
                continue
            name, _, value = line.partition(":")
            fields[name or "comment"] = value.removeprefix(" ")
        raise AssertionError("the stream ended")

    def events_until(self, event_type: str) -> list[dict[str, Any]]:
        """Every event up to and including the first of `event_type`; heartbeats and `retry:` skipped."""
        events = []
        while True:
            fields = self.frame()
            if "event" not in fields:
                continue
            event = json.loads(fields["data"])
            assert fields["id"] == str(event["seq"]) and fields["event"] == event["type"]
            events.append(event)
            if event["type"] == event_type:
                return events


def connect(base: str, session_id: str, headers: dict[str, str] | None = None, **params: str) -> requests.Response:
    response = requests.get(f"{base}/api/sessions/{session_id}/events", params=params,
                            headers={**SSE, **ALICE, **(headers or {})}, stream=True, timeout=30)
    assert response.status_code == 200, response.text
    assert response.headers["Content-Type"].startswith("text/event-stream")
    return response


def new_session(base: str) -> str:
    response = requests.post(f"{base}/api/sessions", json={}, headers=ALICE, timeout=10)
    assert response.status_code == 201
    return str(response.json()["id"])


def test_a_client_that_drops_mid_turn_resumes_with_last_event_id_and_sees_every_event_once(
    stack: Stack, server: str
) -> None:
    session_id = new_session(server)
    with connect(server, session_id) as first:
        requests.post(f"{server}/api/sessions/{session_id}/input", json={"message": REFUND}, headers=ALICE, timeout=10)
        before = EventStream(first).events_until("turn.waiting")  # the turn is parked on the refund approval
    [pending] = stack.pending(session_id)
    approved = requests.patch(f"{server}/api/requests/{pending['requestId']}", json={"optionId": "approve"},
                              headers=ALICE, timeout=10)
    assert approved.status_code == 200
    with connect(server, session_id, {"Last-Event-ID": str(before[-1]["seq"])}) as second:
        after = EventStream(second).events_until("session.waiting")
    seen = before + after
    assert [e["seq"] for e in seen] == list(range(1, len(seen) + 1))
    assert seen == stack.events(session_id)
    assert after[-2]["type"] == "turn.completed" and after[-2]["data"]["result"].startswith("refunded")


def test_last_event_id_wins_over_the_after_of_the_url_an_eventsource_reconnects_to(stack: Stack, server: str) -> None:
    session_id, _ = stack.start(REFUND)
    with connect(server, session_id, {"Last-Event-ID": "5"}, after="2") as response:
        assert EventStream(response).events_until("turn.waiting")[0]["seq"] == 6


def test_after_starts_the_stream_past_that_seq(stack: Stack, server: str) -> None:
    session_id, _ = stack.start(REFUND)
    with connect(server, session_id, after="3") as response:
        events = EventStream(response).events_until("turn.waiting")
    assert events == stack.events(session_id)[3:]


def test_an_idle_stream_sends_keepalive_comments(stack: Stack, server: str) -> None:
    session_id = new_session(server)
    with connect(server, session_id) as response:
        reader = EventStream(response)
        assert reader.frame() == {"retry": str(stream.RETRY_MILLISECONDS)}
        assert reader.frame() == {"comment": "keepalive"}


def test_a_stream_ends_after_its_lifetime_and_the_reconnect_misses_nothing(stack: Stack, server: str,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """So a web process stopping never waits out its graceful timeout on a stream that would never end."""
    monkeypatch.setattr(stream, "LIFETIME_SECONDS", 1.0)
    session_id, _ = stack.start(REFUND)
    with connect(server, session_id) as response:
        started = time.monotonic()
        first = EventStream(response).events_until("turn.waiting")
        rest = []
        for line in response.iter_lines(decode_unicode=True):  # to the end: it ends by itself
            rest.append(line)
            assert time.monotonic() - started < 10, "the stream did not end"
    [pending] = stack.pending(session_id)
    stack.answer(pending["requestId"], "approve")
    with connect(server, session_id, {"Last-Event-ID": str(first[-1]["seq"])}) as again:
        after = EventStream(again).events_until("session.waiting")
    assert not any(line.startswith("id:") for line in rest)
    assert first + after == stack.events(session_id)


def test_an_eventsource_authenticates_with_access_token_in_the_query(stack: Stack, server: str) -> None:
    session_id, _ = stack.start(REFUND)
    url = f"{server}/api/sessions/{session_id}/events"
    missing = requests.get(url, headers=SSE, timeout=10)
    wrong = requests.get(url, params={"access_token": "nope"}, headers=SSE, timeout=10)
    assert (missing.status_code, wrong.status_code) == (401, 401)
    assert missing.json()["error"]["code"] == "unauthorized"
    with requests.get(url, params={"access_token": KEYS["alice"]}, headers=SSE, stream=True, timeout=30) as response:
        assert response.status_code == 200
        assert EventStream(response).events_until("turn.waiting")[0]["type"] == "message.received"


def test_stream_errors_are_json_before_the_stream_starts(stack: Stack, server: str) -> None:
    unknown = requests.get(f"{server}/api/sessions/ses_nope/events", headers={**SSE, **ALICE}, timeout=10)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"]
    session_id = new_session(server)
    bad = requests.get(f"{server}/api/sessions/{session_id}/events", headers={**SSE, **ALICE, "Last-Event-ID": "x"},
                       timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["details"] == {"parameter": "Last-Event-ID"}


def test_without_the_event_stream_accept_header_the_answer_is_the_json_list(stack: Stack, server: str) -> None:
    session_id, _ = stack.start(REFUND)
    response = requests.get(f"{server}/api/sessions/{session_id}/events", params={"after": "2"}, headers=ALICE,
                            timeout=10)
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"events": stack.events(session_id)[2:]}
    token_only = requests.get(f"{server}/api/sessions/{session_id}/events", params={"access_token": KEYS["alice"]},
                              timeout=10)
    assert token_only.status_code == 401  # access_token stands in for the header on the stream only


def test_hitl_serve_logs_the_event_stream_without_its_access_token(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """`hitl serve` logs each request line; an EventSource's key rides in the query, so the log shows it hidden."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    options: dict[str, Any] = {}
    monkeypatch.setenv("DATABASE_URL", stack.settings.database_url)
    monkeypatch.setattr("gateway.app.create_app", lambda settings, rt: stack.app)
    monkeypatch.setattr(cli, "make_server", lambda *args, **given: options.update(given) or SimpleNamespace(
        serve_forever=lambda: None))
    cli.cmd_serve(argparse.Namespace(host="127.0.0.1", port=0))
    httpd = make_server("127.0.0.1", 0, stack.app, threaded=True, request_handler=options.get("request_handler"))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        with caplog.at_level(logging.INFO, logger="werkzeug"):
            for key in (KEYS["alice"], "not-a-key"):
                response = requests.get(f"http://127.0.0.1:{httpd.server_port}/api/sessions/ses_nope/events",
                                        params={"after": "0", "access_token": key}, headers=SSE, timeout=10)
                assert response.status_code in (401, 404)
    finally:
        httpd.shutdown()
        httpd.server_close()
        stack.close()

    lines = [record.getMessage() for record in caplog.records if record.name == "werkzeug"]
    assert [line for line in lines if "/api/sessions/ses_nope/events?after=0&access_token=" in line], lines
    assert not [line for line in lines if KEYS["alice"] in line or "not-a-key" in line], lines


def next_inbox(reader: EventStream) -> dict[str, Any]:
    """The next `inbox` event's document; heartbeats and `retry:` skipped."""
    while True:
        fields = reader.frame()
        if fields.get("event") == "inbox":
            assert "id" not in fields  # nothing to resume after: a reconnect starts with the inbox as it is
            return dict(json.loads(fields["data"]))


def test_the_inbox_stream_tells_at_once_and_whenever_a_request_opens_or_closes(stack: Stack, server: str) -> None:
    url = f"{server}/api/inbox/events"
    with requests.get(url, headers={**SSE, **ALICE}, stream=True, timeout=30) as response:
        assert response.status_code == 200 and response.headers["Content-Type"].startswith("text/event-stream")
        reader = EventStream(response)
        assert next_inbox(reader) == {"requestIds": [], "next": None}
        session_id, _ = stack.start(REFUND)
        [pending] = stack.pending(session_id)
        assert next_inbox(reader) == {"requestIds": [pending["requestId"]], "next": None}
        answered = requests.patch(f"{server}/api/requests/{pending['requestId']}", json={"optionId": "approve"},
                                  headers=ALICE, timeout=10)
        assert answered.status_code == 200
        assert next_inbox(reader) == {"requestIds": [], "next": None}  # answered elsewhere: the badge drops

    other, _ = stack.start(REFUND)
    [waiting] = stack.pending(other)
    as_json = requests.get(url, headers=ALICE, timeout=10)
    assert as_json.headers["Content-Type"] == "application/json"
    assert as_json.json() == {"requestIds": [waiting["requestId"]], "next": None}
    with requests.get(url, params={"access_token": KEYS["alice"]}, headers=SSE, stream=True, timeout=30) as again:
        assert next_inbox(EventStream(again)) == as_json.json()  # a reconnect starts with the inbox as it is
