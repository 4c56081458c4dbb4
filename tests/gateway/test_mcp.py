"""`hitl mcp` as an MCP client runs it: a process of its own on stdio, driven by the MCP SDK's own client, asking
people through a gateway on a real port; people answer through the API meanwhile, as the console does."""

from __future__ import annotations

import ast
import json
import os
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from flask.testing import FlaskClient
from mcp import Client, ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, TextContent

from examples.agents_anywhere import mcp_agent
from gateway.mcp_server import build_server
from tests.conftest import KEYS, ROOT, Stack, sqlite_settings
from tests.gateway.test_client import answering
from tests.support.imports import SERVER_SIDE, packages_loaded_by
from tests.support.live_server import live_server

Gateway = tuple[Stack, str]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Gateway]:
    """A gateway on a real port (SQLite, in-process jobs)."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    with live_server(stack.app) as url:
        yield stack, url
    stack.close()


def hitl_mcp_command(url: str, key: str = KEYS["bot:agent"]) -> StdioServerParameters:
    """`hitl mcp` with HITL_URL and HITL_API_KEY, as a client configured with them starts it."""
    return StdioServerParameters(command=sys.executable, args=["-m", "gateway", "mcp"], cwd=ROOT,
                                 env={**os.environ, "PYTHONPATH": str(ROOT), "HITL_URL": url, "HITL_API_KEY": key})


@asynccontextmanager
async def hitl_mcp(url: str, key: str = KEYS["bot:agent"]) -> AsyncIterator[ClientSession]:
    with open(os.devnull, "w") as quiet:
        async with stdio_client(hitl_mcp_command(url, key), errlog=quiet) as (read, write), \
                ClientSession(read, write) as session:
            await session.initialize()
            yield session


def talk(url: str, conversation: Callable[[ClientSession], Awaitable[None]], key: str = KEYS["bot:agent"]) -> None:
    async def run() -> None:
        async with hitl_mcp(url, key) as session:
            await conversation(session)

    anyio.run(run)


def said(result: CallToolResult) -> str:
    """The sentence a model reads first."""
    first = result.content[0]
    assert isinstance(first, TextContent)
    return first.text


def test_the_server_imports_neither_flask_nor_sqlalchemy() -> None:
    loaded = packages_loaded_by("gateway.mcp_server")

    assert {"mcp", "requests"} <= loaded and not loaded & SERVER_SIDE


def test_the_server_imports_of_the_gateway_only_its_client() -> None:
    tree = ast.parse((ROOT / "gateway" / "mcp_server.py").read_text())

    own = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level}
    assert own == {"client"}


def test_a_question_is_answered_in_the_console_and_the_tool_says_by_whom(served: Gateway) -> None:
    stack, url = served
    progress: list[str | None] = []

    async def conversation(session: ClientSession) -> None:
        tools = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert sorted(tools) == ["ask_human", "request_approval"]
        ask, approve = tools["ask_human"].input_schema, tools["request_approval"].input_schema
        assert (ask["required"], approve["required"]) == (["prompt"], ["action", "input"])
        assert set(ask["properties"]) == {"prompt", "options", "allow_freeform", "to", "approvers", "timeout_seconds"}
        assert set(approve["properties"]) == {"action", "input", "prompt", "to", "approvers", "timeout_seconds",
                                              "editable", "input_schema"}
        assert tools["ask_human"].output_schema is not None

        answering(stack, "bob:operator", optionId="pro")
        chose = await session.call_tool("ask_human", {
            "prompt": "Which plan?", "options": ["Basic", {"id": "pro", "label": "Pro", "description": "$49"}],
            "timeout_seconds": 20}, progress_callback=lambda done, total, message: noted(progress, message))
        answering(stack, "carol", text="the yearly one")
        typed = await session.call_tool("ask_human", {"prompt": "Anything else?", "approvers": ["carol"],
                                                      "timeout_seconds": 20})

        assert not chose.is_error and chose.structured_content is not None
        assert {k: v for k, v in chose.structured_content.items() if k not in ("requestId", "responder")} == {
            "answered": True, "outcome": "answered", "optionId": "pro", "label": "Pro", "text": None}
        assert chose.structured_content["responder"]["principalId"] == "bob"
        assert said(chose) == "bob answered: option 'pro' (Pro)"
        assert json.loads(chose.content[1].text) == chose.structured_content  # type: ignore[union-attr]
        assert typed.structured_content is not None
        assert (typed.structured_content["text"], typed.structured_content["responder"]["principalId"]) == (
            "the yearly one", "carol")
        assert said(typed) == "carol answered: 'the yearly one'"

    talk(url, conversation)

    assert progress and progress[0] is not None and progress[0].startswith("waiting for a person to answer req_")
    asked = stack.client("bob:operator").get("/api/requests?status=resolved").get_json()["requests"]
    assert [(r["prompt"], r["requestedBy"]["principalId"]) for r in asked] == [
        ("Which plan?", "bot"), ("Anything else?", "bot")]


async def noted(progress: list[str | None], message: str | None) -> None:
    progress.append(message)


def test_an_approval_approved_then_one_denied_with_a_note(served: Gateway) -> None:
    stack, url = served

    async def conversation(session: ClientSession) -> None:
        answering(stack, "alice", optionId="approve")
        approved = await session.call_tool("request_approval", {
            "action": "refund_charge", "input": {"charge": "ch_1", "amount": 20}, "approvers": ["alice"],
            "timeout_seconds": 20})
        answering(stack, "alice", optionId="deny", text="not this one")
        denied = await session.call_tool("request_approval", {
            "action": "refund_charge", "input": {"charge": "ch_2"}, "prompt": "Refund ch_2 in full?",
            "approvers": ["alice"], "timeout_seconds": 20})

        assert approved.structured_content is not None and denied.structured_content is not None
        assert (approved.structured_content["approved"], approved.structured_content["outcome"],
                approved.structured_content["responder"]["principalId"]) == (True, "approved", "alice")
        assert said(approved) == "alice approved refund_charge"
        assert (approved.structured_content["input"], approved.structured_content["changes"]) == (
            {"charge": "ch_1", "amount": 20}, None)  # as proposed
        assert {k: v for k, v in denied.structured_content.items() if k not in ("requestId", "responder")} == {
            "approved": False, "outcome": "denied", "note": "not this one", "input": None, "changes": None}
        assert said(denied) == "alice denied refund_charge: not this one"

    talk(url, conversation)

    asked = stack.client("alice").get("/api/requests?status=resolved").get_json()["requests"]
    assert [(r["prompt"], r["action"]["input"], r["outcome"]) for r in asked] == [
        ("Approve refund_charge?", {"charge": "ch_1", "amount": 20}, "approved"),
        ("Refund ch_2 in full?", {"charge": "ch_2"}, "denied")]


REFUND_SCHEMA = {"type": "object", "properties": {"charge": {"type": "string"},
                                                  "amount": {"type": "number", "maximum": 100}},
                 "required": ["charge", "amount"], "additionalProperties": False}


def editing(stack: Stack, who: str, edits: list[dict[str, Any]], statuses: list[int]) -> threading.Thread:
    """`who` approves the first request they are asked with each input of `edits` in turn (as the console's Edit
    does), noting each answer's HTTP status."""
    def run() -> None:
        client = stack.client(who)
        for _ in range(200):
            pending = client.get("/api/requests?status=pending").get_json()["requests"]
            if pending:
                for edited in edits:
                    statuses.append(client.patch(f"/api/requests/{pending[0]['requestId']}",
                                                 json={"optionId": "approve", "input": edited}).status_code)
                return
            threading.Event().wait(0.05)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_an_editable_approval_is_approved_with_the_approvers_input_checked_by_its_schema(served: Gateway) -> None:
    stack, url = served
    statuses: list[int] = []

    async def conversation(session: ClientSession) -> None:
        editing(stack, "alice", [{"charge": "ch_1", "amount": 500}, {"charge": "ch_1", "amount": 10}], statuses)
        edited = await session.call_tool("request_approval", {
            "action": "refund_charge", "input": {"charge": "ch_1", "amount": 20}, "approvers": ["alice"],
            "editable": True, "input_schema": REFUND_SCHEMA, "timeout_seconds": 20})
        unschemed = await session.call_tool("request_approval", {
            "action": "refund_charge", "input": {}, "editable": True, "input_schema": {"type": "nonsense"}})

        assert edited.structured_content is not None and not edited.is_error
        assert (edited.structured_content["approved"], edited.structured_content["input"],
                edited.structured_content["changes"]) == (True, {"charge": "ch_1", "amount": 10}, "amount 20 -> 10")
        assert said(edited) == "alice approved refund_charge with changes (amount 20 -> 10)"
        assert unschemed.is_error and said(unschemed).endswith("fields: action.inputSchema")

    talk(url, conversation)

    assert statuses == [422, 200]  # 500 is over the schema's maximum: refused, and the request stayed open
    [asked] = stack.client("alice").get("/api/requests?status=resolved").get_json()["requests"]
    assert (asked["editable"], asked["action"]["inputSchema"], asked["action"]["input"]) == (
        True, REFUND_SCHEMA, {"charge": "ch_1", "amount": 20})


def test_the_example_client_asks_for_an_approval(served: Gateway, capsys: pytest.CaptureFixture[str]) -> None:
    stack, url = served
    answering(stack, "alice", optionId="approve")

    decided = anyio.run(mcp_agent.approve_refund, hitl_mcp_command(url), "ch_1001", 20.0)

    assert (decided["approved"], decided["responder"]["principalId"]) == (True, "alice")
    assert capsys.readouterr().out.splitlines()[-2:] == [
        "tools: ask_human, request_approval", "alice approved refund_charge"]


def test_nobody_answering_in_time_is_timed_out_and_a_withdrawn_request_says_by_whom(served: Gateway) -> None:
    stack, url = served
    operator = stack.client("bob:operator")

    async def conversation(session: ClientSession) -> None:
        started = time.monotonic()
        late = await session.call_tool("request_approval", {"action": "deploy", "input": {}, "timeout_seconds": 1})
        waited = time.monotonic() - started

        assert late.structured_content is not None and not late.is_error
        assert {k: v for k, v in late.structured_content.items() if k != "requestId"} == {
            "approved": False, "outcome": "timed-out", "note": None, "responder": None, "input": None, "changes": None}
        assert said(late).startswith("Nobody answered within 1 s: request req_") and said(late).endswith(
            "timed out and is closed. Do not deploy.")
        assert waited < 5
        assert operator.get("/api/requests?status=pending").get_json()["requests"] == []

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(cancel_first_pending, operator)
            withdrawn = await session.call_tool("ask_human", {"prompt": "Still there?", "timeout_seconds": 30})
        assert withdrawn.structured_content is not None
        assert (withdrawn.structured_content["outcome"], withdrawn.structured_content["answered"],
                withdrawn.structured_content["responder"]["principalId"]) == ("cancelled", False, "bob")
        assert said(withdrawn).startswith("Nobody answered: bob cancelled request req_")

        with pytest.raises(MCPError):  # the client gives up after 1 s: the server withdraws the request
            await session.call_tool("ask_human", {"prompt": "Which plan?", "timeout_seconds": 60},
                                    read_timeout_seconds=1)
        abandoned = await closed_soon(operator, "Which plan?")
        assert (abandoned["outcome"], abandoned["responder"]["principalId"]) == ("cancelled", "bot")

    talk(url, conversation)


async def cancel_first_pending(operator: FlaskClient) -> None:
    """An operator withdraws the first request waiting (POST /api/requests/<id>/cancel)."""
    for _ in range(200):
        pending = operator.get("/api/requests?status=pending").get_json()["requests"]
        if pending:
            operator.post(f"/api/requests/{pending[0]['requestId']}/cancel")
            return
        await anyio.sleep(0.05)


async def closed_soon(operator: FlaskClient, prompt: str) -> dict[str, Any]:
    """The request asking `prompt`, once it is closed (within 5 s)."""
    for _ in range(100):
        found = [r for r in operator.get("/api/requests").get_json()["requests"] if r["prompt"] == prompt]
        if found and found[0]["status"] == "resolved":
            return found[0]
        await anyio.sleep(0.05)
    raise AssertionError(f"{prompt!r} is still open: {found}")


def in_process(conversation: Callable[[Client], Awaitable[None]]) -> None:
    """The server in this process (its environment: the test's), through the SDK's in-memory transport."""
    async def run() -> None:
        async with Client(build_server()) as client:
            await conversation(client)

    anyio.run(run)


def test_the_gateways_refusals_are_tool_errors_naming_them(served: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    _, url = served
    monkeypatch.setenv("HITL_URL", url)
    monkeypatch.setenv("HITL_API_KEY", "not-a-key-of-this-gateway-0123")

    async def wrong_key(client: Client) -> None:
        refused = await client.call_tool("ask_human", {"prompt": "Which plan?"})
        assert refused.is_error
        assert said(refused) == ("Error executing tool ask_human: the gateway refused: unauthorized: a valid "
                                 "`Authorization: Bearer <key>` header is required (HTTP 401) (check HITL_API_KEY)")

    in_process(wrong_key)
    monkeypatch.setenv("HITL_API_KEY", KEYS["bot:agent"])

    async def invalid(client: Client) -> None:
        one_option = await client.call_tool("ask_human", {"prompt": "Which plan?", "options": ["Only one"]})
        nowhere = await client.call_tool("request_approval", {
            "action": "deploy", "input": {}, "to": {"channel": "carrier-pigeon", "address": {}}})
        too_long = await client.call_tool("ask_human", {"prompt": "Which plan?", "timeout_seconds": 0})
        assert one_option.is_error and nowhere.is_error and too_long.is_error
        assert said(one_option).startswith("Error executing tool ask_human: the gateway refused: invalid_request: "
                                           "options: ")
        assert said(one_option).endswith("(HTTP 422); fields: options")
        assert said(nowhere) == ("Error executing tool request_approval: the gateway refused: unknown_channel: "
                                 "channel 'carrier-pigeon' is not configured (HTTP 422); fields: to.channel")
        assert "timeout_seconds" in said(too_long)

    in_process(invalid)
    monkeypatch.setenv("HITL_URL", "http://127.0.0.1:9")  # the discard port: nothing listens

    async def unreachable(client: Client) -> None:
        down = await client.call_tool("request_approval", {"action": "deploy", "input": {}})
        assert down.is_error and said(down).startswith(
            "Error executing tool request_approval: the gateway at http://127.0.0.1:9 cannot be reached: ")

    in_process(unreachable)


def test_calls_wait_side_by_side(served: Gateway, monkeypatch: pytest.MonkeyPatch) -> None:
    stack, url = served
    monkeypatch.setenv("HITL_URL", url)
    monkeypatch.setenv("HITL_API_KEY", KEYS["bot:agent"])
    results: dict[str, CallToolResult] = {}

    async def two_at_once(client: Client) -> None:
        async def ask(prompt: str) -> None:
            results[prompt] = await client.call_tool("ask_human", {"prompt": prompt, "timeout_seconds": 20})

        async with anyio.create_task_group() as tasks:
            tasks.start_soon(ask, "first?")
            tasks.start_soon(ask, "second?")
            with anyio.fail_after(10):  # both wait at once: neither holds up the other
                while len(stack.client("bob:operator").get("/api/requests?status=pending").get_json()["requests"]) < 2:
                    await anyio.sleep(0.05)
            for request in stack.client("bob:operator").get("/api/requests?status=pending").get_json()["requests"]:
                stack.client("carol").patch(f"/api/requests/{request['requestId']}",
                                            json={"text": f"yes to {request['prompt']}"})

    in_process(two_at_once)

    assert {prompt: said(result) for prompt, result in results.items()} == {
        "first?": "carol answered: 'yes to first?'", "second?": "carol answered: 'yes to second?'"}


def test_hitl_mcp_names_what_it_needs(hitl: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HITL_URL", raising=False)
    no_url = hitl("mcp")
    monkeypatch.setenv("HITL_URL", "http://127.0.0.1:9")
    monkeypatch.delitem(sys.modules, "gateway.mcp_server")
    monkeypatch.setitem(sys.modules, "mcp.server.mcpserver", None)  # as if the extra were not installed
    no_sdk = hitl("mcp")

    assert (no_url.code, no_url.message) == (
        1, "hitl: hitl mcp needs HITL_URL, the gateway's URL (and HITL_API_KEY, an agent's key)")
    assert (no_sdk.code, no_sdk.message) == (1, "hitl: hitl mcp needs the MCP SDK: install hitl-gateway[mcp]")
