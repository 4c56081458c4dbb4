"""The examples' offline model: each message asks for one tool call, then the model says how it went.

It reads the transcript in OpenAI chat format as every model does (docs/writing-agents.md), so an example runs
without an API key; examples/openai_compatible and examples/anthropic_model show the same tools on real models.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from engine import ModelReply, ScriptedModel, ToolCallRequest


def one_call(call: Callable[[str], ToolCallRequest | None], done: Callable[[dict[str, Any]], str],
             usage: str) -> ScriptedModel:
    """A model that answers a user message with the call `call(text)` makes of it (or `usage` when it makes
    none), and the call's result with `done(result)`, or with its error when it failed or was denied."""

    def play(messages: list[dict[str, Any]]) -> ModelReply:
        last = messages[-1]
        if last["role"] == "user":
            request = call(last["content"] or "")
            return ModelReply(tool_calls=[request]) if request else ModelReply(text=usage)
        result = json.loads(last["content"])  # the tool's result, or {"error": {code, message}}
        if isinstance(result, dict) and result.get("error"):
            return ModelReply(text=f"That did not happen: {result['error']['message']}")
        return ModelReply(text=done(result))

    return ScriptedModel(play)
