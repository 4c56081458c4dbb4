"""An MCP client's `ask_human`, answered by a person in the web console (Debian's chromium, driven by Playwright)."""

from __future__ import annotations

import threading
from typing import Any

import anyio
from mcp_types import CallToolResult

from tests.browser.conftest import Shot, paste_key
from tests.conftest import KEYS
from tests.gateway.test_mcp import hitl_mcp, said

try:
    from playwright.sync_api import expect
except ImportError:  # require_browser() then skips every test with the reason (or fails it under CI)
    pass


def test_an_mcp_tool_call_is_answered_in_the_console(keyed_page: Any, keyed: str, shot: Shot) -> None:
    page = keyed_page
    results: list[CallToolResult] = []

    async def ask() -> None:
        async with hitl_mcp(keyed) as session:
            results.append(await session.call_tool("ask_human", {
                "prompt": "Which plan should the MCP agent pick?", "options": ["Basic", "Pro"],
                "timeout_seconds": 30}))

    asking = threading.Thread(target=anyio.run, args=(ask,), daemon=True)
    asking.start()
    paste_key(page, KEYS["bob:operator"])
    page.goto("/#/inbox")
    card = page.locator("article.card").filter(has_text="Which plan should the MCP agent pick?")
    expect(card.get_by_role("button", name="Pro", exact=True)).to_be_visible()
    shot(page, "1-asked-by-an-mcp-client")
    card.get_by_role("button", name="Pro", exact=True).click()
    expect(card.locator(".outcome")).to_have_text("answered by bob: Pro")
    shot(page, "2-answered")
    asking.join(timeout=20)

    [result] = results
    assert said(result) == "bob answered: option 'Pro' (Pro)"
    assert result.structured_content is not None and result.structured_content["responder"]["principalId"] == "bob"
