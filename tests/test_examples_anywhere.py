"""examples/agents_anywhere against a gateway on a real port (SQLite, in-process jobs): each example asks, people
answer through the API, and the example does what it says; the receiver verifies a real callback."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from engine.jobs.webhooks import parse_secret, signature
from examples.agents_anywhere import callback_receiver, client_agent, rest_api
from gateway.client import HitlClient
from tests.conftest import KEYS, Stack, sqlite_settings
from tests.gateway.test_client import answering
from tests.support.live_server import live_server

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    stack = Stack("sqlite", sqlite_settings(tmp_path, callback_secret=SECRET))
    with live_server(stack.app) as url:
        yield stack, url
    stack.close()


def test_the_rest_api_example_waits_for_the_approval(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    answering(stack, "alice", optionId="approve")

    closed = rest_api.ask_and_wait(url, KEYS["bot:agent"], "ch_1001", 20.0)

    assert (closed["outcome"], closed["responder"]["principalId"]) == ("approved", "alice")
    assert closed["action"]["input"] == {"charge_id": "ch_1001", "amount": 20.0}
    again = rest_api.ask_and_wait(url, KEYS["bot:agent"], "ch_1001", 20.0)  # its idempotency key: the same one
    assert again["requestId"] == closed["requestId"]


def test_the_client_example_asks_then_refunds_once_approved(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    hitl = HitlClient(url, api_key=KEYS["bot:agent"])

    people = answering_in_turn(stack, [("alice", {"optionId": "Pro"}), ("bob", {"optionId": "approve"}),
                                       ("carol", {"text": "Basic, for now"}),
                                       ("carol", {"optionId": "deny", "text": "refund already sent"})])
    assert client_agent.run(hitl) == "plan Pro; refunded 20.00 on ch_1001"
    assert client_agent.run(hitl) == "plan Basic, for now; refund denied: refund already sent"
    people.join(10)


def answering_in_turn(stack: Stack, answers: list[tuple[str, dict[str, Any]]]) -> threading.Thread:
    """People answer each request as it comes, in order: the first answer goes to the first request asked."""
    def run() -> None:
        answered: set[str] = set()
        for who, answer in answers:
            for _ in range(400):
                pending = [r for r in stack.client("bob:operator").get("/api/requests?status=pending")
                           .get_json()["requests"] if r["requestId"] not in answered]
                if pending:
                    stack.client(who).patch(f"/api/requests/{pending[0]['requestId']}", json=answer)
                    answered.add(pending[0]["requestId"])
                    break
                threading.Event().wait(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_the_callback_receiver_takes_a_signed_callback_once_and_refuses_others(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    got: list[tuple[str, dict[str, Any]]] = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), callback_receiver.receiver(SECRET, lambda i, p: got.append((i, p))))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hitl = HitlClient(url, api_key=KEYS["bot:agent"])
        answering(stack, "alice", optionId="Pro")
        asked = hitl.request_answer("Which plan?", options=["Basic", "Pro"],
                                    callback_url=f"http://127.0.0.1:{server.server_port}/hitl")
        hitl.wait(asked["requestId"], timeout=10)
        stack.wait_idle()
    finally:
        server.shutdown()
        server.server_close()

    [(message_id, payload)] = got
    assert (message_id, payload["request"]["outcome"]) == (f"msg_{asked['requestId']}", "answered")
    assert hitl.get(asked["requestId"])["callback"]["status"] == "delivered"
    body, now = b'{"type": "input.resolved"}', 1_700_000_000
    headers = {"webhook-id": "msg_1", "webhook-timestamp": str(now),
               "webhook-signature": signature(parse_secret(SECRET), "msg_1", now, body)}
    assert callback_receiver.verify(SECRET, headers, body, now=now + 10) == {"type": "input.resolved"}
    for secret, at in (("whsec_" + "A" * 32, now), (SECRET, now + 301)):  # another secret; too late
        with pytest.raises(callback_receiver.Unverified):
            callback_receiver.verify(secret, headers, body, now=at)
