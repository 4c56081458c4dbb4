"""ToolCall bookkeeping shared by the runner and by settlement: results, rejections, the input hash."""

from __future__ import annotations

import hashlib
import json
from decimal import Decimal
from typing import Any

from sqlalchemy.orm import Session as DbSession

from .agent import Agent
from .db import write_row
from .events import add_message, emit
from .protocol import app_reason, principal_or_none
from .runtime import Runtime
from .tables import ToolCall

DONE = ("completed", "failed", "not_run")


def input_hash(data: dict[str, Any]) -> str:
    """The digest of a call's input as the database gives it back: PostgreSQL's JSONB keeps numbers as
    numerics, so a float Python writes with a positive exponent (`1e+16`) reads back as an integer and a
    negative zero as zero; each is hashed as it reads back (the input itself is kept as the model sent it)."""
    return hashlib.sha256(json.dumps(_as_read_back(data), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _as_read_back(value: Any) -> Any:
    if isinstance(value, float):
        if value == 0:
            return 0.0
        text = repr(value)
        return int(Decimal(text)) if "e+" in text else value
    if isinstance(value, dict):
        return {key: _as_read_back(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_as_read_back(item) for item in value]
    return value


def finish_call(
    rt: Runtime, db: DbSession, call: ToolCall, session_id: str, status: str, output: Any,
    error: dict[str, Any] | None, *, call_status: str | None = None, note: str | None = None,
) -> None:
    """Record a call's result: its status, an action.result event, and the tool message the model reads.
    `call_status`: the call's own status where it is not its result's (a call that did not run). `note`: what
    the model reads beside the result of a call the app approved for nobody who answered (`{"approval": note,
    "output": ...}`, or `"error"`; see `approval_note`)."""
    write_row(db, call, status=call_status or status, result={"status": status, "output": output, "error": error},
              updated_at=rt.now())
    data: dict[str, Any] = {"callId": call.call_id, "status": status, "output": output}
    if error:
        data["error"] = error
    emit(db, session_id, "action.result", data, turn_id=call.turn_id, at=rt.now())
    said: dict[str, Any] = {"error": error} if error else {"output": output}
    content = json.dumps({"approval": note, **said} if note else (said if error else output))
    add_message(db, session_id, call.turn_id, "tool", content=content, tool_call_id=call.call_id)


def approval_note(call: ToolCall) -> str | None:
    """What the model reads beside the result of a call whose approval nobody gave: "approved on timeout"."""
    if not call.approval_request_id:
        return None
    return app_reason(principal_or_none(call.responder))


def reject_call(
    rt: Runtime, db: DbSession, call: ToolCall, note: str, session_id: str, *, status: str = "rejected"
) -> None:
    """A call that will not run: `not_run`, an action.result (`rejected` or `cancelled`), a denial the model reads."""
    error = {"code": "TOOL_EXECUTION_DENIED", "message": note}
    finish_call(rt, db, call, session_id, status, None, error, call_status="not_run")


def reject_unusable(rt: Runtime, db: DbSession, agent: Agent, call: ToolCall, session_id: str) -> None:
    """A call to a tool that does not exist, or with input that does not fit, fails at once."""
    error = unusable(agent, call.tool, call.input)
    if error is not None:
        finish_call(rt, db, call, session_id, "failed", None, error)


def unusable(agent: Agent, name: str, data: dict[str, Any]) -> dict[str, str] | None:
    """Why a call cannot run (no such tool, input that does not fit), or None when it can."""
    tool = agent.tools.get(name)
    try:
        if tool is None:
            raise LookupError(f"there is no tool named {name}")
        tool.validate(data)
    except LookupError as exc:
        return {"code": "UNKNOWN_TOOL", "message": str(exc)}
    except ValueError as exc:
        return {"code": "INVALID_INPUT", "message": str(exc)}
    return None
