"""gateway.client against a gateway on a real port (SQLite, in-process jobs): an agent that runs elsewhere asks,
waits, and is told; people answer through the API meanwhile."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gateway.client import Answer, Denied, Expired, HitlClient, HitlError
from tests.conftest import KEYS, Stack, sqlite_settings
from tests.support.live_server import live_server


@pytest.fixture
def gateway(tmp_path: Path) -> Iterator[tuple[Stack, str]]:
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    with live_server(stack.app) as url:
        yield stack, url
    stack.close()


def agent(url: str, **options: Any) -> HitlClient:
    return HitlClient(url, api_key=KEYS["bot:agent"], **options)


def answering(stack: Stack, who: str, **answer: Any) -> threading.Thread:
    """`who` answers the first request they are asked, once one waits (as a person in the console would)."""
    def run() -> None:
        client = stack.client(who)
        for _ in range(200):
            pending = client.get("/api/requests?status=pending").get_json()["requests"]
            if pending:
                client.patch(f"/api/requests/{pending[0]['requestId']}", json=answer)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_approval_is_requested_then_waited_for(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    hitl = agent(url)
    req = hitl.request_approval(tool="refund_charge", input={"charge": "ch_1", "amount": 20}, approvers=["alice"],
                                metadata={"ticket": 7})
    assert (req["status"], req["approvers"], req["metadata"]) == ("pending", ["alice"], {"ticket": 7})

    answering(stack, "alice", optionId="approve")
    settled = hitl.wait(req["requestId"], timeout=20)

    assert (settled["outcome"], settled["responder"]["principalId"]) == ("approved", "alice")


def test_an_approval_two_people_give_waits_for_both(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    hitl = agent(url)
    req = hitl.request_approval(tool="deploy", input={"version": "2"}, approvers=["alice", "bob"], quorum=2)
    assert (req["quorum"], req["approvals"]["need"]) == (2, 2)

    answering(stack, "alice", optionId="approve").join(20)
    assert hitl.get(req["requestId"])["approvals"]["have"] == 1
    answering(stack, "bob", optionId="approve")
    settled = hitl.wait(req["requestId"], timeout=20)

    assert (settled["outcome"], [a["name"] for a in settled["approvals"]["by"]]) == ("approved", ["alice", "bob"])


def test_ask_blocks_until_a_person_answers(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    answering(stack, "carol", optionId="Pro")

    answer = agent(url).ask("Which plan?", options=["Basic", "Pro", {"id": "team", "label": "Team"}], timeout=20)

    assert answer == Answer(option_id="Pro", text=None, responder=answer.responder, label="Pro",
                            request=answer.request)
    assert answer.responder is not None and answer.responder["principalId"] == "carol"
    assert answer.request is not None and [o["id"] for o in answer.request["options"]] == ["Basic", "Pro", "team"]


def test_a_decorated_function_runs_once_approved_and_never_when_denied(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    hitl = agent(url)
    refunded: list[tuple[str, float]] = []

    @hitl.require_approval(approvers=["alice"], timeout=20)
    def refund_charge(charge_id: str, amount: float = 10.0) -> dict[str, Any]:
        refunded.append((charge_id, amount))
        return {"refunded": amount}

    answering(stack, "alice", optionId="approve")
    assert refund_charge("ch_1", amount=20) == {"refunded": 20}
    answering(stack, "alice", optionId="deny", text="not this one")
    with pytest.raises(Denied) as denied:
        refund_charge("ch_2")

    assert refunded == [("ch_1", 20)]
    assert (denied.value.note, denied.value.responder["principalId"]) == ("not this one", "alice")  # type: ignore[index]
    asked = stack.client("alice").get("/api/requests?status=resolved").get_json()["requests"]
    assert [(r["action"]["toolName"], r["action"]["input"]) for r in asked] == [
        ("refund_charge", {"charge_id": "ch_1", "amount": 20}),
        ("refund_charge", {"charge_id": "ch_2", "amount": 10.0})]  # its default too


def test_nobody_answering_in_time_is_expired_and_the_request_is_closed(gateway: tuple[Stack, str]) -> None:
    stack, url = gateway
    hitl = agent(url, expiry_grace=0.5)

    with pytest.raises(Expired) as expired:
        hitl.ask("Still there?", timeout=1)

    assert (expired.value.request["status"], expired.value.request["outcome"]) == ("resolved", "cancelled")
    assert stack.client("bob:operator").get("/api/requests?status=pending").get_json()["requests"] == []


def test_api_errors_name_the_code_and_message(gateway: tuple[Stack, str]) -> None:
    _, url = gateway

    with pytest.raises(HitlError) as refused:
        HitlClient(url, api_key=KEYS["alice"]).request_approval(tool="refund", input={})
    with pytest.raises(HitlError) as invalid:
        agent(url).request_answer("Which plan?", options=["Only one"])

    assert (refused.value.status, refused.value.code) == (403, "not_permitted")
    assert str(refused.value) == "not_permitted: only an agent's or an operator's key opens requests (HTTP 403)"
    assert (invalid.value.code, invalid.value.details[0]["field"]) == ("invalid_request", "options")
