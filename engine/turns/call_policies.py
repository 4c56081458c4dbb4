"""What becomes of a call: a model step's new calls judged by their request policies (run now, ask a person,
or refuse), and a call whose worker died while it ran (run again, ask again, or fail)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine.answers.edits import granted_key
from engine.answers.input_requests import open_approval
from engine.jobs.runtime import Runtime
from engine.policies import ApprovalContext, SessionInfo, Verdict, always, call_policy, never, once, to_verdict
from engine.protocol import APP_PRINCIPAL, principal_or_none
from engine.store.statuses import CallStatus, ResultStatus
from engine.store.tables import ApprovalGrant, InputRequest, Session, ToolCall, Turn
from engine.turns.calls import finish_call, reject_call, unusable

log = logging.getLogger(__name__)


def session_info(session: Session) -> SessionInfo:
    return SessionInfo(
        id=session.id, agent=session.agent, channel=session.channel, address=session.address,
        initiator=principal_or_none(session.initiator),
    )


Proposed = tuple[str, str, dict[str, Any]]
"""A call as its request policy sees it: the call's id, its tool's name, its input."""


def constant(policy: Callable[..., Any]) -> bool:
    """never(), always() and once() answer at once (once() reads the grants): they are judged in the step's
    transaction, so a usual step costs no transaction more. Any other policy may take its time."""
    return type(policy) in (never, always, once)


def review(rt: Runtime, session_id: str, calls: list[Proposed]) -> dict[str, Verdict]:
    """The verdicts of a model step's usable calls, judged before the transaction that records the step when
    one of their policies may take its time (an auto() reviewer, the application's code), so that no lock is
    held while it works; empty when every policy is a constant one (judged in the transaction, by decide())."""
    usable = [call for call in calls if unusable(rt.agent, call[1], call[2]) is None]
    if all(constant(rt.agent.tools[name].request_policy) for _, name, _ in usable):
        return {}
    with rt.db.read() as db:
        info = session_info(db.get_one(Session, session_id))

    def grants() -> set[str]:
        with rt.db.read() as db:
            return visible_grants(rt, db, session_id)

    return {call[0]: verdict for call, verdict in zip(usable, judge(rt, info, usable, grants), strict=True)}


def decide(rt: Runtime, db: DbSession, session_id: str, calls: list[ToolCall]) -> None:
    """Each call's verdict, in order: approved calls run, denied ones are refused, the rest wait for a person."""
    info = session_info(db.get_one(Session, session_id))
    proposed = [(call.call_id, call.tool, call.input) for call in calls]
    verdicts = judge(rt, info, proposed, lambda: visible_grants(rt, db, session_id))
    for call, verdict in zip(calls, verdicts, strict=True):  # (each recorded before the next is judged)
        record_verdict(rt, db, session_id, call, verdict)


def judge(rt: Runtime, info: SessionInfo, calls: list[Proposed], read_grants: Callable[[], set[str]]) \
        -> Iterator[Verdict]:
    """Each call's verdict, in order. The grants are read when a policy first looks (most never do); a grant is
    invisible while a same-key approval waits, one of this step's earlier calls too."""
    visible: set[str] | None = None
    asked: set[str] = set()

    def grants() -> frozenset[str]:
        nonlocal visible
        if visible is None:
            visible = read_grants()
        return frozenset(grant for grant in visible if granted_key(grant) not in asked)

    for call_id, name, data in calls:
        tool = rt.agent.tools[name]
        ctx = ApprovalContext(session=info, tool_name=name, tool_input=data, call_id=call_id,
                              approval_key=tool.approval_key, grants=grants)
        try:
            verdict = to_verdict(call_policy(tool.request_policy, ctx, timeout=rt.request_policy_timeout))
        except TimeoutError:  # a hung policy must not hold the turn (its lease is kept while it runs) forever
            log.warning("request policy of %s did not answer in %g s; asking a person", name, rt.request_policy_timeout)
            verdict = Verdict("user-approval", f"the request policy did not answer in {rt.request_policy_timeout:g} s")
        except Exception as exc:  # a broken policy must not run the call unreviewed
            log.warning("request policy of %s failed; asking a person", name, exc_info=True)
            verdict = Verdict("user-approval", f"request policy error: {exc}")
        if verdict.decision == "user-approval":
            asked.add(tool.approval_key)
        yield verdict


def visible_grants(rt: Runtime, db: DbSession, session_id: str) -> set[str]:
    """The session's grants, less those of an approval key a call still waits on a person for (rule 2)."""
    granted = set(db.execute(
        select(ApprovalGrant.approval_key).where(ApprovalGrant.session_id == session_id)
    ).scalars())
    waiting = db.execute(
        select(ToolCall.tool).join(Turn, Turn.id == ToolCall.turn_id).where(
            Turn.session_id == session_id,
            (ToolCall.status == CallStatus.AWAITING_APPROVAL)
            | ((ToolCall.status == CallStatus.PROPOSED) & ToolCall.verdict.is_not(None)),
        )
    ).scalars()
    waiting_keys = set()
    for tool_name in waiting:
        tool = rt.agent.tools.get(tool_name)
        waiting_keys.add(tool.approval_key if tool else tool_name)
    return {grant for grant in granted if granted_key(grant) not in waiting_keys}


def record_verdict(rt: Runtime, db: DbSession, session_id: str, call: ToolCall, verdict: Verdict) -> None:
    call.updated_at = rt.now()
    if verdict.decision in ("not-applicable", "approved"):
        call.status = CallStatus.APPROVED
        if verdict.decision == "approved":
            call.responder = APP_PRINCIPAL.wire() | {"attributes": {"reason": verdict.reason}}
    elif verdict.decision == "denied":
        note = f"Denied by policy: {verdict.reason}" if verdict.reason else "Denied by policy"
        reject_call(rt, db, call, note, session_id)
    else:
        call.verdict = {"decision": verdict.decision, "reason": verdict.reason}


def recover(rt: Runtime, db: DbSession, turn: Turn, calls: list[ToolCall]) -> list[InputRequest]:
    """DESIGN.md rule 12: calls whose worker died while they ran; returns the approvals it opened."""
    now, opened = rt.now(), []
    for call in calls:
        tool = rt.agent.tools[call.tool]
        call.updated_at = now
        if tool.idempotent:
            call.status = CallStatus.APPROVED
        elif tool.needs_approval:
            opened.append(open_approval(
                db, call, tool, session_id=turn.session_id, requested_by=turn.requested_by, now=now,
                channels=rt.channels,
                prompt=f"Approve {tool.title} again? An earlier attempt was interrupted and may have partly run.",
            ))
        else:
            finish_call(rt, db, call, turn.session_id, ResultStatus.FAILED, None, {
                "code": "TOOL_INTERRUPTED",
                "message": f"The worker running {call.tool} stopped; the call may have partly run "
                "and was not retried.",
            })
    return opened
