"""A ToolCall's result, however it comes: `finish_call` records it (the call's status, an `action.result` event,
the tool message the model reads), `reject_call` for a call that will not run (denied, cancelled, ignored),
`reject_unusable` for one to a tool that does not exist or with input that does not fit, and `approval_note` for
what the model reads beside a call approved otherwise than as proposed. Used by the runner, the call policies and
settlement. Tools themselves are defined in engine/agent.py."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.orm import Session as DbSession

from engine.agent import Agent, Tool
from engine.answers.edits import approved_with_changes
from engine.jobs.runtime import Runtime
from engine.protocol import Principal, app_reason
from engine.store.db import write_row
from engine.store.events import add_message, emit
from engine.store.statuses import CallStatus, ResultStatus
from engine.store.tables import InputRequest, ToolCall


def finish_call(
    rt: Runtime, db: DbSession, call: ToolCall, session_id: str, status: str, output: Any,
    error: dict[str, Any] | None, *, call_status: str | None = None, note: str | None = None,
) -> None:
    """Record a call's result: its status, an action.result event, and the tool message the model reads.
    `call_status`: the call's own status where it is not its result's (a call that did not run). `note`: what
    the model reads beside the result of a call approved otherwise than as proposed by a person: with changes,
    or by the app on timeout (`{"approval": note, "output": ...}`, or `"error"`; see `approval_note`)."""
    write_row(db, call, status=call_status or status, result={"status": status, "output": output, "error": error},
              updated_at=rt.now())
    data: dict[str, Any] = {"callId": call.call_id, "status": status, "output": output}
    if error:
        data["error"] = error
    emit(db, session_id, "action.result", data, turn_id=call.turn_id, at=rt.now())
    said: dict[str, Any] = {"error": error} if error else {"output": output}
    content = json.dumps({"approval": note, **said} if note else (said if error else output))
    add_message(db, session_id, call.turn_id, "tool", content=content, tool_call_id=call.call_id)


def approval_note(db: DbSession, tool: Tool, call: ToolCall) -> str | None:
    """What the model reads beside the result of a call approved otherwise than as proposed by a person: "approved
    on timeout" when nobody answered, or who approved it with which changes (read for an editable tool's calls
    only)."""
    if not (call.approval_request_id and call.responder):
        return None
    responder = Principal.model_validate(call.responder)
    reason = app_reason(responder)
    if reason is not None or not tool.editable:
        return reason
    request = db.get(InputRequest, call.approval_request_id)
    summary = (request.response or {}).get("changes") if request is not None else None
    return approved_with_changes(responder.display_name, summary) if summary else None


def reject_call(
    rt: Runtime, db: DbSession, call: ToolCall, note: str, session_id: str, *, status: str = ResultStatus.REJECTED
) -> None:
    """A call that will not run: `not_run`, an action.result (`rejected` or `cancelled`), a denial the model reads."""
    error = {"code": "TOOL_EXECUTION_DENIED", "message": note}
    finish_call(rt, db, call, session_id, status, None, error, call_status=CallStatus.NOT_RUN)


def reject_unusable(rt: Runtime, db: DbSession, agent: Agent, call: ToolCall, session_id: str) -> None:
    """A call to a tool that does not exist, or with input that does not fit, fails at once."""
    error = unusable(agent, call.tool, call.input)
    if error is not None:
        finish_call(rt, db, call, session_id, ResultStatus.FAILED, None, error)


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
