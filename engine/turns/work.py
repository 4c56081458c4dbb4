"""The work a Run does between its transactions (engine/turns/runner.py keeps the bookkeeping): running an
approved tool call, and calling the model for its next step, whose new calls the request policies that may take
their time review before the step is recorded. Nothing here holds a lock or opens a transaction."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from engine.agent import Park, Tool, ToolContext
from engine.answers.edits import input_hash
from engine.jobs.runtime import Runtime
from engine.llm import ModelReply
from engine.policies import Verdict
from engine.store.storage import new_id
from engine.turns.call_policies import review


@dataclass(frozen=True)
class RunTool:
    """Work: run an approved call (already marked `running`)."""

    call_id: str
    tool: Tool
    data: dict[str, Any]
    expected_hash: str
    ctx: ToolContext


@dataclass(frozen=True)
class CallModel:
    """Work: ask the model for the next step; `seen` is the last transcript seq it reads."""

    messages: list[dict[str, Any]]
    seen: int


@dataclass(frozen=True)
class ToolDone:
    call_id: str
    output: Any = None
    error: dict[str, Any] | None = None
    parked: bool = False
    """The tool asked a person (`ctx.ask()`) and waits for the answer."""


@dataclass(frozen=True)
class ModelDone:
    reply: ModelReply
    seen: int
    call_ids: list[str]
    verdicts: dict[str, Verdict]
    """The calls' verdicts judged before the step's transaction (see call_policies.review)."""


Work = RunTool | CallModel
Done = ToolDone | ModelDone


def run_tool(work: RunTool) -> ToolDone:
    """Run the call with the input that was approved (its hash checked), as strict JSON; a tool that raised
    gives an error result, one that asked a person (`Park`) a parked result."""
    if input_hash(work.data) != work.expected_hash:
        return ToolDone(work.call_id, error={"code": "INPUT_CHANGED",
                                             "message": "the call's input differs from what was approved"})
    try:
        output = work.tool.invoke(work.ctx, work.data)
    except Park:
        return ToolDone(work.call_id, parked=True)
    except Exception as exc:
        return ToolDone(work.call_id, error={"code": "TOOL_ERROR", "message": f"{type(exc).__name__}: {exc}"})
    try:  # strict JSON (PostgreSQL and the model's endpoint refuse NaN); the tool ran, so say so
        json.dumps(output, allow_nan=False)
    except (TypeError, ValueError) as exc:
        message = f"{work.tool.name} ran, but its result cannot be stored as JSON: {type(exc).__name__}: {exc}"
        return ToolDone(work.call_id, error={"code": "TOOL_ERROR", "message": message})
    return ToolDone(work.call_id, output=output)


def call_model(rt: Runtime, session_id: str, work: CallModel) -> ModelDone:
    """The model's next step, its calls numbered and reviewed by the request policies that take their time."""
    reply = rt.agent.model.complete(work.messages, rt.agent.tool_specs())
    ids = [new_id("call") for _ in reply.tool_calls]
    proposed = [(call_id, c.name, dict(c.input)) for call_id, c in zip(ids, reply.tool_calls, strict=True)]
    return ModelDone(reply, work.seen, ids, review(rt, session_id, proposed))
