"""`hitl mcp`: a stdio Model Context Protocol server whose tools ask people through the gateway
(docs/agents-anywhere.md, "MCP server").

Any MCP client (Claude Desktop, Claude Code, Cursor, the OpenAI Agents SDK) runs it with HITL_URL and HITL_API_KEY
(an `agent` key) in its environment. Two tools, `ask_human` and `request_approval`, each open a request with
`gateway.client.HitlClient` and return once a person answers or `timeout_seconds` pass. The blocking client runs in
a worker thread, so the server keeps reading its stdin (other calls, cancellations) meanwhile.

It imports the MCP SDK, `requests` and the standard library: neither Flask nor SQLAlchemy loads.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Annotated, Any, Literal, NotRequired

import anyio
import requests
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import Field
from typing_extensions import TypedDict

from .client import HitlClient, HitlError, name_of

__all__ = ["build_server"]

log = logging.getLogger("hitl.mcp")

DEFAULT_TIMEOUT = 600
"""How long a tool waits for a person unless its call says `timeout_seconds`."""
MAX_TIMEOUT = 24 * 3600
"""The longest a tool call may wait: a day."""
EXPIRY_GRACE = 1.0
"""Past `timeout_seconds`, how long to wait for the gateway to close the request `expired` itself before the
server cancels it (the client's own default, 30 s, would keep the tool call waiting half a minute longer)."""
PROGRESS_SECONDS = 10.0
"""How often a waiting call tells a client that asked for progress that it is still waiting (clients that reset
their timeout on progress then wait as long as the call does)."""

INSTRUCTIONS = ("Ask people through hitl-gateway. Use ask_human for a question a person must answer, and "
                "request_approval before an action a person must allow. Each call waits until a person answers "
                "or its timeout_seconds pass; act only on what the result says.")


class Place(TypedDict):
    """Where the request is shown, as `POST /api/requests` takes `to`."""

    channel: Annotated[str, Field(description="a channel the gateway has configured: slack, twilio or github")]
    address: Annotated[dict[str, Any], Field(
        description='Slack {"channel": "C0123", "threadTs"?}, Twilio {"to": "+15551230001"}, '
                    'GitHub {"repo": "owner/name", "issue": 7}')]


class Option(TypedDict):
    label: str
    id: NotRequired[str]
    description: NotRequired[str]


class AskResult(TypedDict):
    answered: bool
    outcome: Literal["answered", "timed-out", "cancelled"]
    requestId: str
    optionId: str | None
    label: str | None
    text: str | None
    responder: dict[str, Any] | None


class ApprovalResult(TypedDict):
    approved: bool
    outcome: Literal["approved", "denied", "timed-out", "cancelled"]
    requestId: str
    note: str | None
    responder: dict[str, Any] | None
    input: dict[str, Any] | None
    """The input to take the action with once approved: the approver's edit of an editable one, else as proposed."""
    changes: str | None
    """What the approver changed (`amount 200 -> 20`), when they did."""


Timeout = Annotated[int, Field(ge=1, le=MAX_TIMEOUT, description=(
    "seconds to wait for a person; then the request is closed and the result says timed-out"))]
To = Annotated[Place | None, Field(description="where people are asked; without it, in the gateway's console")]
Approvers = Annotated[list[str] | None, Field(description=(
    "principal ids, any one of whom may answer (slack:<team>:<user>, twilio:<+number>, github:<user id>, an API "
    "key's name); operators always may. Without it, anyone where it is shown"))]


async def ask_human(
    prompt: Annotated[str, Field(min_length=1, max_length=4000, description="the question, as people will read it")],
    ctx: Context,
    options: Annotated[list[str | Option] | None, Field(description=(
        "2 to 5 choices (a string is its own id and label); without them people type their answer"))] = None,
    allow_freeform: Annotated[bool, Field(description="with options, take a typed answer too")] = False,
    to: To = None,
    approvers: Approvers = None,
    timeout_seconds: Timeout = DEFAULT_TIMEOUT,
) -> Annotated[CallToolResult, AskResult]:
    """Ask people a question and wait for the answer. The result says who answered and what: the chosen option's
    id and label, or the text they typed; or that nobody answered within timeout_seconds."""
    def opened(hitl: HitlClient) -> dict[str, Any]:
        return hitl.request_answer(prompt, [dict(o) if isinstance(o, dict) else o for o in options or []] or None,
                                   allow_freeform, dict(to) if to else None, approvers, expires_in=timeout_seconds)

    closed = await open_and_wait(ctx, opened, timeout_seconds)
    response = closed.get("response") or {}
    labels = {o["id"]: o["label"] for o in closed.get("options") or []}
    answered = closed["outcome"] == "answered"
    result: AskResult = {"answered": answered,
                         "outcome": "answered" if answered else "timed-out" if timed_out(closed) else "cancelled",
                         "requestId": closed["requestId"], "optionId": response.get("optionId"),
                         "label": labels.get(response.get("optionId") or ""), "text": response.get("text"),
                         "responder": responder(closed)}
    if answered:
        chose = f"option {result['optionId']!r} ({result['label']})" if result["optionId"] else None
        typed = f"{result['text']!r}" if result["text"] else None
        said = f"{name_of(result['responder'])} answered: " + " with ".join(p for p in (chose, typed) if p)
    else:
        said = not_answered(closed, timeout_seconds)
    return tool_result(said, dict(result))


async def request_approval(
    action: Annotated[str, Field(min_length=1, max_length=200, description=(
        "the name of the action (tool) to approve, e.g. refund_charge"))],
    input: Annotated[dict[str, Any], Field(description="the action's arguments, shown to the approver")],
    ctx: Context,
    prompt: Annotated[str | None, Field(max_length=4000, description=(
        "what people are asked (default: Approve <action>?)"))] = None,
    to: To = None,
    approvers: Approvers = None,
    timeout_seconds: Timeout = DEFAULT_TIMEOUT,
    editable: Annotated[bool, Field(description=(
        "people may approve the action with another input (which must fit input_schema); the result's input is the "
        "one approved"))] = False,
    input_schema: Annotated[dict[str, Any] | None, Field(description=(
        "with editable: the JSON Schema an edited input must fit (without it, any JSON object)"))] = None,
) -> Annotated[CallToolResult, ApprovalResult]:
    """Ask people to approve an action before you take it, and wait for their decision. Take the action only when
    the result says approved: true, and with the result's input (an editable action's approver may have changed
    it); denied comes with the approver's note; nobody deciding within timeout_seconds is timed-out, which is not
    an approval."""
    def opened(hitl: HitlClient) -> dict[str, Any]:
        return hitl.request_approval(action, input, dict(to) if to else None, approvers,
                                     expires_in=timeout_seconds, prompt=prompt, editable=editable,
                                     input_schema=input_schema)

    closed = await open_and_wait(ctx, opened, timeout_seconds)
    decided = closed["outcome"]
    outcome: Literal["approved", "denied", "timed-out", "cancelled"] = (
        "approved" if decided == "approved" else "denied" if decided == "denied"
        else "timed-out" if timed_out(closed) else "cancelled")
    response = closed.get("response") or {}
    approved = outcome == "approved"
    result: ApprovalResult = {"approved": approved, "outcome": outcome, "requestId": closed["requestId"],
                              "note": response.get("text"), "responder": responder(closed),
                              "input": response.get("input", closed["action"]["input"]) if approved else None,
                              "changes": response.get("changes")}
    if outcome in ("approved", "denied"):
        changed = f" with changes ({result['changes']})" if result["changes"] else ""
        said = f"{name_of(result['responder'])} {outcome} {action}{changed}" + (
            f": {result['note']}" if result["note"] else "")
    else:
        said = not_answered(closed, timeout_seconds) + f" Do not {action}."
    return tool_result(said, dict(result))


async def open_and_wait(ctx: Context, opened: Callable[[HitlClient], dict[str, Any]], timeout: int) -> dict[str, Any]:
    """Open a request (`opened`) and wait until it closes or `timeout` seconds pass (then it is closed, expired or
    cancelled). An error of the gateway, or none reachable, is a ToolError naming it; a call the client cancels
    cancels its request."""
    hitl = HitlClient(expiry_grace=EXPIRY_GRACE)
    request = await anyio.to_thread.run_sync(gateway_call, hitl, lambda: opened(hitl))
    try:
        return await waited(ctx, hitl, request, timeout)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(withdraw, hitl, request["requestId"])
        raise


async def waited(ctx: Context, hitl: HitlClient, request: dict[str, Any], timeout: int) -> dict[str, Any]:
    """The request once closed, waited for in a worker thread while the client hears progress."""
    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(report, ctx, request["requestId"], timeout)
            closed = await anyio.to_thread.run_sync(gateway_call, hitl, lambda: hitl.closed(request, timeout),
                                                    abandon_on_cancel=True)
            tasks.cancel_scope.cancel()
    except* ToolError as failed:  # the task group groups what its body raised
        raise failed.exceptions[0] from None
    return closed


async def report(ctx: Context, request_id: str, timeout: int) -> None:
    """Progress every PROGRESS_SECONDS: the seconds waited of `timeout` (a no-op unless the client asked for it)."""
    seconds = 0.0
    while True:
        await ctx.report_progress(seconds, timeout, f"waiting for a person to answer {request_id} ({seconds:.0f} s)")
        await anyio.sleep(PROGRESS_SECONDS)
        seconds += PROGRESS_SECONDS


def gateway_call(hitl: HitlClient, call: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`call`'s answer; ToolError with the gateway's error (its code, message, the fields at fault) or why it
    cannot be reached."""
    try:
        return call()
    except HitlError as exc:
        details = exc.details if isinstance(exc.details, list) else [exc.details]
        fields = [d["field"] for d in details if isinstance(d, dict) and "field" in d]
        hint = " (check HITL_API_KEY)" if exc.status == 401 else ""
        raise ToolError(f"the gateway refused: {exc}{hint}" + (f"; fields: {', '.join(fields)}" if fields else "")) \
            from None
    except requests.RequestException as exc:
        raise ToolError(f"the gateway at {hitl.url} cannot be reached: {exc}") from None


def withdraw(hitl: HitlClient, request_id: str) -> None:
    """Cancel the request of a call the client stopped waiting for, so nobody answers it later; what keeps it open
    (closed meanwhile, the gateway unreachable) is logged: the call is over either way."""
    try:
        hitl.cancel(request_id)
    except (HitlError, requests.RequestException) as exc:
        log.info("request %s of an abandoned call was not withdrawn: %s", request_id, exc)


def timed_out(closed: dict[str, Any]) -> bool:
    """Closed because nobody answered in time: it expired, or this agent's key cancelled it (the server does, past
    `timeout_seconds`). Not when someone else (an operator) withdrew it."""
    return closed["outcome"] == "expired" or closed["outcome"] == "cancelled" and (
        (closed.get("responder") or {}).get("principalId") == (closed.get("requestedBy") or {}).get("principalId"))


def responder(closed: dict[str, Any]) -> dict[str, Any] | None:
    """Who answered, decided or withdrew the request; None when it timed out."""
    return None if timed_out(closed) else closed.get("responder")


def not_answered(closed: dict[str, Any], timeout: int) -> str:
    if not timed_out(closed):
        return f"Nobody answered: {name_of(closed.get('responder'))} cancelled request {closed['requestId']}."
    return f"Nobody answered within {timeout} s: request {closed['requestId']} timed out and is closed."


def tool_result(said: str, structured: dict[str, Any]) -> CallToolResult:
    """A sentence for the model, the result as JSON text (for clients that read only text) and as structured
    content."""
    return CallToolResult(content=[TextContent(type="text", text=said),
                                   TextContent(type="text", text=json.dumps(structured))],
                          structured_content=structured)


def build_server() -> MCPServer[Any]:
    """The server with its two tools; ValueError when HITL_URL is not set."""
    if not os.environ.get("HITL_URL"):
        raise ValueError("hitl mcp needs HITL_URL, the gateway's URL (and HITL_API_KEY, an agent's key)")
    try:
        release = version("hitl-gateway")
    except PackageNotFoundError:
        release = ""
    server: MCPServer[Any] = MCPServer("hitl-gateway", version=release, instructions=INSTRUCTIONS)
    waits = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False,
                            open_world_hint=True)
    server.add_tool(ask_human, title="Ask a person", annotations=waits)
    server.add_tool(request_approval, title="Ask a person to approve an action", annotations=waits)
    return server
