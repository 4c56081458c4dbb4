"""Request policies applied to a model step's new calls: run now, ask a person, or refuse."""

from __future__ import annotations

import logging

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from .policies import ApprovalContext, SessionInfo, Verdict, call_policy, to_verdict
from .protocol import APP_PRINCIPAL, principal_or_none
from .runtime import Runtime
from .tables import ApprovalGrant, Session, ToolCall, Turn
from .tools import reject_call

log = logging.getLogger(__name__)


def session_info(session: Session) -> SessionInfo:
    return SessionInfo(
        id=session.id, agent=session.agent, channel=session.channel, address=session.address,
        initiator=principal_or_none(session.initiator),
    )


def decide(rt: Runtime, db: DbSession, session_id: str, calls: list[ToolCall]) -> None:
    """Each call's verdict, in order: approved calls run, denied ones are refused, the rest wait for a person."""
    info = session_info(db.get_one(Session, session_id))
    visible: set[str] | None = None  # read when a policy first looks (most never do)

    def grants() -> frozenset[str]:
        nonlocal visible
        if visible is None:  # (counts this step's calls already waiting on a person: their verdicts flush first)
            visible = visible_grants(rt, db, session_id)
        return frozenset(visible)

    for call in calls:
        tool = rt.agent.tools[call.tool]
        ctx = ApprovalContext(session=info, tool_name=call.tool, tool_input=call.input, call_id=call.call_id,
                              approval_key=tool.approval_key, grants=grants)
        try:
            verdict = to_verdict(call_policy(tool.request_policy, ctx))
        except Exception as exc:  # a broken policy must not run the call unreviewed
            log.warning("request policy of %s failed; asking a person", call.tool, exc_info=True)
            verdict = Verdict("user-approval", f"request policy error: {exc}")
        if verdict.decision == "user-approval" and visible is not None:
            visible.discard(tool.approval_key)  # a grant is invisible while a same-key approval waits
        record_verdict(rt, db, session_id, call, verdict)


def visible_grants(rt: Runtime, db: DbSession, session_id: str) -> set[str]:
    granted = set(db.execute(
        select(ApprovalGrant.approval_key).where(ApprovalGrant.session_id == session_id)
    ).scalars())
    waiting = db.execute(
        select(ToolCall.tool).join(Turn, Turn.id == ToolCall.turn_id).where(
            Turn.session_id == session_id,
            (ToolCall.status == "awaiting_approval")
            | ((ToolCall.status == "proposed") & ToolCall.verdict.is_not(None)),
        )
    ).scalars()
    for tool_name in waiting:
        tool = rt.agent.tools.get(tool_name)
        granted.discard(tool.approval_key if tool else tool_name)
    return granted


def record_verdict(rt: Runtime, db: DbSession, session_id: str, call: ToolCall, verdict: Verdict) -> None:
    call.updated_at = rt.now()
    if verdict.decision in ("not-applicable", "approved"):
        call.status = "approved"
        if verdict.decision == "approved":
            call.responder = APP_PRINCIPAL.wire() | {"attributes": {"reason": verdict.reason}}
    elif verdict.decision == "denied":
        note = f"Denied by policy: {verdict.reason}" if verdict.reason else "Denied by policy"
        reject_call(rt, db, call, note, session_id)
    else:
        call.verdict = {"decision": verdict.decision, "reason": verdict.reason}
