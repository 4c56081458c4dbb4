"""The bench agent (`HITL_AGENT=bench.agent:agent`): the cheapest possible park/resume cycle.

Its model asks for one `always()` tool on the first step and answers as soon as the tool's result is in:
one model step, one approval, one tool run, one final answer.
"""

from __future__ import annotations

from typing import Any

from engine import Agent, ModelReply, ScriptedModel, ToolCallRequest, always, tool


@tool(approval=always())
def touch() -> dict[str, Any]:
    """A tool that does nothing, behind an approval."""
    return {"touched": True}


def play(messages: list[dict[str, Any]]) -> ModelReply:
    if messages[-1]["role"] == "tool":
        return ModelReply(text="done")
    return ModelReply(tool_calls=[ToolCallRequest("touch", {})])


agent = Agent(name="bench", instructions="Touch, then say done.", model=ScriptedModel(play), tools=[touch])
