"""The MCP server, from an MCP client's side: start `hitl mcp`, list its tools, ask for an approval and wait.

    HITL_URL=http://127.0.0.1:8000 HITL_API_KEY=<an agent's key> python -m examples.agents_anywhere.mcp_agent

This is what Claude Desktop, Claude Code, Cursor or the OpenAI Agents SDK do with the configuration in
docs/agents-anywhere.md: they start the server with HITL_URL and HITL_API_KEY and call its tools when the model asks.
Here the official `mcp` package's stdio client does it (`pip install 'hitl-gateway[mcp]'`).
"""

from __future__ import annotations

import os
from typing import Any

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp_types import TextContent

HITL_MCP = StdioServerParameters(command="hitl", args=["mcp"], env={
    name: os.environ[name] for name in ("HITL_URL", "HITL_API_KEY") if name in os.environ})
"""How an MCP client starts the server: the command, and the environment it is given."""


async def approve_refund(server: StdioServerParameters, charge_id: str, amount: float) -> dict[str, Any]:
    """Ask for approval of a refund through `hitl mcp` and wait (up to 10 minutes); the tool's structured result."""
    async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))
        result = await session.call_tool("request_approval", {
            "action": "refund_charge", "input": {"charge_id": charge_id, "amount": amount},
            "prompt": f"Refund {amount:.2f} on {charge_id}?", "timeout_seconds": 600})
    said = result.content[0]
    print(said.text if isinstance(said, TextContent) else said)  # what the model reads: who decided, and how
    if result.is_error or result.structured_content is None:
        raise RuntimeError("the gateway refused the request (see above)")
    return result.structured_content


def main() -> None:
    decided = anyio.run(approve_refund, HITL_MCP, "ch_1001", 20.0)
    print("refunding" if decided["approved"] else f"not refunding ({decided['outcome']})")


if __name__ == "__main__":
    main()
