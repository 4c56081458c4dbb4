"""Callbacks of external requests: signed per Standard Webhooks (checked with the `standardwebhooks` package, as a
receiver would), delivered at least once through the outbox, retried with backoff for 24 h, never sent to a
link-local or cloud-metadata address (SQLite + in-process jobs, a receiver on a real port)."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select
from standardwebhooks import Webhook

from engine.answers.external import NewRequest, open_external_request
from engine.answers.submit import submit_responses
from engine.jobs.callbacks import claim
from engine.jobs.recovery import sweep
from engine.jobs.webhooks import WebhookRefused, check_url, parse_secret, signature
from engine.protocol import InputResponse, api_key_principal
from engine.store.queries import get_request
from engine.store.tables import Outbox
from tests.conftest import Stack, sqlite_settings
from tests.support.hooks import Hooks, hook_server

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
QUESTION = NewRequest(kind="question", prompt="Which plan?", options=[{"id": "pro", "label": "Pro"},
                                                                      {"id": "basic", "label": "Basic"}])


@pytest.fixture
def hooks() -> Iterator[Hooks]:
    with hook_server() as receiver:
        yield receiver


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    built = Stack("sqlite", sqlite_settings(tmp_path, callback_secret=SECRET))
    yield built
    built.close()


def asked(stack: Stack, url: str) -> str:
    new = NewRequest(**{**QUESTION.__dict__, "callback_url": url, "metadata": {"ticket": 7}})
    return str(open_external_request(stack.rt, api_key_principal("bot"), new).request["requestId"])


def answered(stack: Stack, request_id: str) -> None:
    submit_responses(stack.rt, api_key_principal("alice"), [InputResponse(request_id=request_id, option_id="pro")])
    stack.wait_idle()


def at(stack: Stack, when: datetime) -> None:
    stack.rt.clock = lambda: when


def test_a_closed_request_is_posted_once_signed_per_standard_webhooks(stack: Stack, hooks: Hooks) -> None:
    request_id = asked(stack, hooks.url)

    answered(stack, request_id)

    [sent] = hooks.received
    payload = Webhook(SECRET).verify(sent.body, sent.headers)  # raises unless signed with the secret
    assert payload["type"] == "input.resolved"
    assert (payload["request"]["requestId"], payload["request"]["outcome"]) == (request_id, "answered")
    assert (payload["request"]["response"]["optionId"], payload["request"]["metadata"]) == ("pro", {"ticket": 7})
    assert "callback" not in payload["request"]  # the body is the same on every attempt
    assert sent.headers["webhook-id"] == f"msg_{request_id}"
    assert get_request(stack.rt, request_id)["callback"] == {"status": "delivered", "attempts": 1,
                                                             "lastError": None, "nextAttemptAt": None}
    with pytest.raises(Exception, match="signature"):
        Webhook("whsec_" + "A" * 32).verify(sent.body, sent.headers)


def test_a_failed_attempt_is_retried_after_its_backoff_with_the_same_id(stack: Stack, hooks: Hooks) -> None:
    request_id = asked(stack, hooks.url)
    hooks.statuses = [500]
    answered(stack, request_id)
    state = get_request(stack.rt, request_id)["callback"]
    assert (state["status"], state["attempts"], state["lastError"]) == ("retrying", 1, "it answered HTTP 500")
    due = datetime.fromisoformat(state["nextAttemptAt"])

    at(stack, due - timedelta(seconds=1))
    assert sweep(stack.rt).callbacks == 0  # not before its time
    at(stack, due)
    assert sweep(stack.rt).callbacks == 1
    stack.wait_idle()

    assert get_request(stack.rt, request_id)["callback"]["status"] == "delivered"
    assert [r.headers["webhook-id"] for r in hooks.received] == [f"msg_{request_id}"] * 2
    assert hooks.received[0].body == hooks.received[1].body


def test_it_is_retried_for_24_hours_then_failed(stack: Stack, hooks: Hooks) -> None:
    request_id = asked(stack, hooks.url)
    hooks.statuses = [503] * 20
    answered(stack, request_id)
    closed_at = datetime.fromisoformat(get_request(stack.rt, request_id)["resolvedAt"])
    waits = []

    while (state := get_request(stack.rt, request_id)["callback"])["status"] == "retrying":
        due = datetime.fromisoformat(state["nextAttemptAt"])
        waits.append(round((due - (closed_at + timedelta(seconds=sum(waits)))).total_seconds()))
        at(stack, due)
        sweep(stack.rt)
        stack.wait_idle()

    assert waits[:9] == [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800]
    assert (state["status"], state["attempts"], state["nextAttemptAt"]) == ("failed", 11, None)
    assert stack.rt.now() - closed_at < timedelta(hours=24)  # the 12th would have come after 24 h
    assert len(hooks.received) == 11


def test_an_attempt_whose_worker_died_is_sent_again_once_its_lease_ends(stack: Stack, hooks: Hooks) -> None:
    stack.rt.executor.submit = lambda *args, **kwargs: None  # type: ignore[method-assign]  # jobs wait here
    request_id = asked(stack, hooks.url)
    answered(stack, request_id)
    now = stack.rt.now()
    at(stack, now + timedelta(seconds=1))

    with stack.rt.db.read() as db:
        job = db.execute(select(Outbox.id).where(Outbox.job == "send_callback")).scalar_one()
    with stack.rt.running_job(job):  # the job's first transaction takes its outbox row
        assert claim(stack.rt, request_id) is not None  # ...and its worker dies before it records anything
    assert claim(stack.rt, request_id) is None  # no second sender meanwhile
    at(stack, now + timedelta(seconds=62))
    assert sweep(stack.rt).callbacks == 1


def test_a_name_that_resolves_to_a_metadata_address_when_called_is_refused(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """DNS rebinding: the name was fine when the request was made, and resolves to 169.254.169.254 when called."""
    resolve = socket.getaddrinfo

    def rebound(host: str, *args: Any, **kwargs: Any) -> Any:
        if host == "hooks.rebind.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return resolve(host, *args, **kwargs)

    request_id = asked(stack, "http://hooks.rebind.test/hitl")
    monkeypatch.setattr(socket, "getaddrinfo", rebound)
    answered(stack, request_id)

    state = get_request(stack.rt, request_id)["callback"]
    assert (state["status"], state["attempts"]) == ("retrying", 1)
    assert state["lastError"] == ("hooks.rebind.test resolves to 169.254.169.254, a link-local or cloud metadata "
                                  "address")


@pytest.mark.parametrize("url", ["http://169.254.169.254/latest/meta-data", "http://[fe80::1]/x",
                                 "http://[fd00:ec2::254]/x", "http://metadata.google.internal/x",
                                 "http://[::ffff:169.254.169.254]/x", "http://METADATA.google.internal./x"])
def test_link_local_and_metadata_addresses_are_always_refused(url: str) -> None:
    with pytest.raises(WebhookRefused):
        check_url(url, allowed_hosts=())


def test_allowed_hosts_restrict_where_callbacks_go() -> None:
    assert check_url("https://Hooks.Example.com/x", {"hooks.example.com"}) == "hooks.example.com"
    with pytest.raises(WebhookRefused, match="not in HITL_CALLBACK_ALLOWED_HOSTS"):
        check_url("https://other.example.com/x", {"hooks.example.com"})


def test_the_signature_matches_the_standard_webhooks_example() -> None:
    """The example of the Standard Webhooks specification (its README's signature of this payload)."""
    key = parse_secret(SECRET)

    assert signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, b'{"test": 2432232314}') == \
        "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
    with pytest.raises(ValueError, match="whsec_"):
        parse_secret("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
