"""The turn runner: the model/tool loop of DESIGN.md section 5, one Run at a time, parking on people."""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session as DbSession

from .agent import Approval, Park, ToolContext
from .events import add_message, emit
from .lease import LeaseKeeper
from .policies import ApprovalContext, SessionInfo, Verdict, call_policy, expiry, to_verdict
from .protocol import APP_PRINCIPAL, principal_or_none
from .requests import CONTINUE, STOP, open_approval, open_request, request_wire
from .runtime import Runtime
from .tables import ApprovalGrant, InputRequest, Run, Session, ToolCall, Turn, new_id
from .tools import DONE, finish_call, input_hash, reject_call
from .transcript import load_messages, model_view, steered_since
from .turns import claim, end_turn, latest_run, lock_turn, pending_requests
from .workflow import CallWorkflow

log = logging.getLogger(__name__)


class LeaseLost(Exception):
    """Another runner owns the turn now, or it was cancelled: stop without writing."""


def session_info(session: Session) -> SessionInfo:
    return SessionInfo(
        id=session.id, agent=session.agent, channel=session.channel, address=session.address,
        initiator=principal_or_none(session.initiator),
    )


def run_turn(rt: Runtime, turn_id: str) -> None:
    """Job body: claim the turn, drive it until it parks or ends. Safe to call twice."""
    run_id = claim(rt, turn_id)
    if run_id is None:
        return
    keeper = LeaseKeeper(rt, turn_id, run_id)
    keeper.start()
    try:
        Driver(rt, turn_id, run_id).drive()
    except LeaseLost:
        log.info("turn %s: no longer ours (cancelled, or presumed dead and recovered)", turn_id)
    except Exception as exc:
        log.exception("turn %s failed", turn_id)
        fail(rt, turn_id, run_id, {"code": "TURN_ERROR", "message": f"{type(exc).__name__}: {exc}"})
    finally:
        keeper.stop()


def fail(rt: Runtime, turn_id: str, run_id: str, error: dict[str, Any]) -> None:
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        run = db.get_one(Run, run_id)
        if turn.status == "running" and run.status == "running":
            end_turn(rt, db, turn, run, "failed", error=error)


class Driver:
    """Drives one Run of a turn. Every write checks the run still owns the turn (fencing)."""

    def __init__(self, rt: Runtime, turn_id: str, run_id: str) -> None:
        self.rt, self.turn_id, self.run_id = rt, turn_id, run_id
        self.agent = rt.agent

    def fenced(self, db: DbSession) -> Turn:
        turn = lock_turn(db, self.turn_id)
        run = latest_run(db, self.turn_id)
        if turn.status != "running" or run is None or run.id != self.run_id:
            raise LeaseLost(self.turn_id)
        return turn

    def drive(self) -> None:
        while True:
            calls = self.open_calls()
            if calls:
                if self.work_on_calls(calls):
                    return
            elif self.next_step():
                return

    def open_calls(self) -> list[ToolCall]:
        with self.rt.db.read() as db:
            return list(db.execute(
                select(ToolCall).where(ToolCall.turn_id == self.turn_id, ToolCall.status.not_in(DONE))
                .order_by(ToolCall.step, ToolCall.position)
            ).scalars())

    # -- tool calls -------------------------------------------------------------------------------

    def work_on_calls(self, calls: list[ToolCall]) -> bool:
        """Decide new calls, run the ready ones, open approvals, then park if anything waits. True when parked."""
        undecided = [c for c in calls if c.status == "proposed" and c.verdict is None]
        if undecided:
            self.decide(undecided)
        if any(c.status == "unknown" for c in calls):
            self.recover([c for c in calls if c.status == "unknown"])
        self.reopen_answered_asks()
        self.open_approvals()
        for call_id in self.calls_in("approved"):
            self.execute(call_id)
        self.open_approvals()  # those that waited for a workflow tool of their step
        return self.park_if_waiting()

    def calls_in(self, status: str) -> list[str]:
        with self.rt.db.read() as db:
            return list(db.execute(
                select(ToolCall.call_id).where(ToolCall.turn_id == self.turn_id, ToolCall.status == status)
                .order_by(ToolCall.step, ToolCall.position)
            ).scalars())

    def decide(self, calls: list[ToolCall]) -> None:
        with self.rt.db.read() as db:
            turn = db.get_one(Turn, self.turn_id)
            info = session_info(db.get_one(Session, turn.session_id))
            visible = self.visible_grants(db, turn.session_id)
        verdicts: dict[str, Verdict] = {}
        for call in calls:
            tool = self.agent.tools[call.tool]
            ctx = ApprovalContext(session=info, tool_name=call.tool, tool_input=call.input,
                                  approved_keys=frozenset(visible), call_id=call.call_id,
                                  approval_key=tool.approval_key)
            try:
                verdict = to_verdict(call_policy(tool.request_policy, ctx))
            except Exception as exc:  # a broken policy must not run the call unreviewed
                log.warning("request policy of %s failed; asking a person", call.tool, exc_info=True)
                verdict = Verdict("user-approval", f"request policy error: {exc}")
            if verdict.decision == "user-approval":
                visible.discard(tool.approval_key)  # a grant is invisible while a same-key approval waits
            verdicts[call.call_id] = verdict
        self.record_verdicts(verdicts)

    def visible_grants(self, db: DbSession, session_id: str) -> set[str]:
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
            tool = self.agent.tools.get(tool_name)
            granted.discard(tool.approval_key if tool else tool_name)
        return granted

    def record_verdicts(self, verdicts: dict[str, Verdict]) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            for call_id, verdict in verdicts.items():
                call = db.get_one(ToolCall, call_id)
                call.updated_at = self.rt.now()
                if verdict.decision in ("not-applicable", "approved"):
                    call.status = "approved"
                    if verdict.decision == "approved":
                        call.responder = APP_PRINCIPAL.wire() | {"attributes": {"reason": verdict.reason}}
                elif verdict.decision == "denied":
                    note = f"Denied by policy: {verdict.reason}" if verdict.reason else "Denied by policy"
                    reject_call(self.rt, db, call, note, turn.session_id)
                else:
                    call.verdict = {"decision": verdict.decision, "reason": verdict.reason}

    def open_approvals(self) -> None:
        """Approvals decided but not yet asked; those of a step whose workflow tool has not finished come later."""
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            calls = db.execute(
                select(ToolCall).where(ToolCall.turn_id == self.turn_id, ToolCall.status == "proposed",
                                       ToolCall.verdict.is_not(None))
                .order_by(ToolCall.step, ToolCall.position)
            ).scalars().all()
            unfinished = db.execute(select(ToolCall.step, ToolCall.tool, ToolCall.status).where(
                ToolCall.turn_id == self.turn_id, ToolCall.status.in_(["awaiting_input", "approved", "running"])
            )).all()
            asking = {step for step, name, status in unfinished  # a tool with a ctx may still ctx.ask()
                      if status == "awaiting_input" or self.agent.tools[name].takes_context}
            now, opened = self.rt.now(), []
            for call in calls:
                if call.step in asking:
                    continue
                tool = self.agent.tools[call.tool]
                expires_at = expiry(getattr(tool.request_policy, "expires_in", None), now)
                opened.append(open_approval(db, call, title=tool.title, session_id=turn.session_id,
                                            requested_by=turn.requested_by, now=now, expires_at=expires_at))
            self.announce(db, turn, opened)

    def announce(self, db: DbSession, turn: Turn, opened: list[InputRequest]) -> None:
        if opened:
            db.flush()
            emit(db, turn.session_id, "input.requested", {"requests": [request_wire(r) for r in opened]},
                 turn_id=turn.id, at=self.rt.now())

    def reopen_answered_asks(self) -> None:
        """A workflow call whose questions are all answered runs again from the top."""
        with self.rt.transaction() as db:
            self.fenced(db)
            waiting = db.execute(select(ToolCall).where(
                ToolCall.turn_id == self.turn_id, ToolCall.status == "awaiting_input")).scalars().all()
            for call in waiting:
                open_asks = db.execute(select(func.count()).select_from(InputRequest).where(
                    InputRequest.call_id == call.call_id, InputRequest.status == "pending")).scalar_one()
                if not open_asks:
                    call.status = "approved"

    def recover(self, calls: list[ToolCall]) -> None:
        """DESIGN.md rule 12: a call whose worker died while it ran."""
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            now, opened = self.rt.now(), []
            for stale in calls:
                call = db.get_one(ToolCall, stale.call_id)
                tool = self.agent.tools[call.tool]
                call.updated_at = now
                if tool.idempotent:
                    call.status = "approved"
                elif tool.needs_approval:
                    opened.append(open_approval(
                        db, call, title=tool.title, session_id=turn.session_id, requested_by=turn.requested_by,
                        now=now, prompt=f"Approve {tool.title} again? An earlier attempt was interrupted "
                        "and may have partly run.",
                    ))
                else:
                    finish_call(self.rt, db, call, turn.session_id, "failed", None, {
                        "code": "TOOL_INTERRUPTED",
                        "message": f"The worker running {call.tool} stopped; the call may have partly run "
                        "and was not retried.",
                    })
            self.announce(db, turn, opened)

    def execute(self, call_id: str) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            call = db.get_one(ToolCall, call_id)
            if call.status != "approved":
                return
            if call.attempts == 0 or call.interrupted:
                emit(db, turn.session_id, "action.called",
                     {"callId": call.call_id, "toolName": call.tool, "input": call.input}, turn_id=turn.id,
                     at=self.rt.now())
            call.status, call.attempts, call.run_id = "running", call.attempts + 1, self.run_id
            call.updated_at = self.rt.now()
            ctx = self.tool_context(db, turn, call)
            tool, data, expected_hash = self.agent.tools[call.tool], dict(call.input), call.input_hash
        output, error = None, None
        if input_hash(data) != expected_hash:
            error = {"code": "INPUT_CHANGED", "message": "the call's input differs from what was approved"}
        else:
            try:
                output = tool.invoke(ctx, data)
                json.dumps(output)
            except Park:
                self.await_input(call_id)
                return
            except Exception as exc:
                error = {"code": "TOOL_ERROR", "message": f"{type(exc).__name__}: {exc}"}
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            call = db.get_one(ToolCall, call_id)
            finish_call(self.rt, db, call, turn.session_id, "failed" if error else "completed", output, error)

    def await_input(self, call_id: str) -> None:
        with self.rt.transaction() as db:
            self.fenced(db)
            call = db.get_one(ToolCall, call_id)
            call.status, call.updated_at = "awaiting_input", self.rt.now()

    def tool_context(self, db: DbSession, turn: Turn, call: ToolCall) -> ToolContext:
        approval = None
        if call.approval_request_id:
            request = db.get_one(InputRequest, call.approval_request_id)
            responder = principal_or_none(request.responder)
            if responder is not None:
                approval = Approval(request.request_id, responder, (request.response or {}).get("text"))
        elif call.responder:
            approval = Approval("policy", APP_PRINCIPAL, (call.responder.get("attributes") or {}).get("reason"))
        session = db.get_one(Session, turn.session_id)
        return ToolContext(
            session_id=turn.session_id, turn_id=turn.id, call_id=call.call_id,
            requester=principal_or_none(turn.requested_by), approval=approval,
            idempotency_key=f"idem_{call.call_id}", channel=session.channel,
            previous_attempt_may_have_run=call.interrupted > 0,
            workflow=CallWorkflow(self.rt, call.call_id, self.fenced),
        )

    def park_if_waiting(self) -> bool:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            if not pending_requests(db, self.turn_id):
                return False
            now = self.rt.now()
            run = db.get_one(Run, self.run_id)
            run.status, run.ended_at = "interrupted", now
            turn.status, turn.lease_until, turn.updated_at = "waiting", None, now
            emit(db, turn.session_id, "turn.waiting", {"on": "input"}, turn_id=turn.id, at=now)
            return True

    # -- the model ----------------------------------------------------------------------------------

    def next_step(self) -> bool:
        """Call the model unless the step budget is spent (then ask to continue). True when parked or ended."""
        with self.rt.db.read() as db:
            turn = db.get_one(Turn, self.turn_id)
            over_budget = turn.step_budget is not None and turn.steps >= turn.step_budget
            limit = db.get(InputRequest, limit_request_id(turn)) if over_budget else None
        if not over_budget:
            return self.call_model()
        if limit is not None and limit.status == "resolved":
            self.stop()  # a `continue` raised the budget; anything else ends the turn
            return True
        self.ask_to_continue()
        return self.park_if_waiting()

    def ask_to_continue(self) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            request_id = limit_request_id(turn)
            if db.get(InputRequest, request_id) is not None:
                return
            request = open_request(
                db, session_id=turn.session_id, turn_id=turn.id, run_id=self.run_id, kind="session-limit",
                prompt=f"The agent has taken {turn.steps} steps on this request. Let it continue?",
                options=[CONTINUE, STOP], allow_freeform=False, display="confirmation",
                requested_by=turn.requested_by, now=self.rt.now(), request_id=request_id,
            )
            self.announce(db, turn, [request])

    def stop(self) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            end_turn(self.rt, db, turn, db.get_one(Run, self.run_id), "cancelled")

    def call_model(self) -> bool:
        """Ask the model for its next step; True when the turn ended."""
        with self.rt.db.read() as db:
            turn = db.get_one(Turn, self.turn_id)
            messages = load_messages(db, turn.session_id)
        seen = messages[-1].seq if messages else 0
        reply = self.agent.model.complete(model_view(self.agent.instructions, messages), self.agent.tool_specs())
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            now = self.rt.now()
            turn.steps += 1
            calls = [
                ToolCall(call_id=new_id("call"), turn_id=turn.id, run_id=self.run_id, step=turn.steps,
                         position=position, tool=request.name, input=dict(request.input),
                         input_hash=input_hash(dict(request.input)), status="proposed", created_at=now,
                         updated_at=now)
                for position, request in enumerate(reply.tool_calls)
            ]
            wire_calls = [{"id": c.call_id, "type": "function",
                           "function": {"name": c.tool, "arguments": json.dumps(c.input)}} for c in calls]
            add_message(db, turn.session_id, turn.id, "assistant", content=reply.text,
                        tool_calls=wire_calls or None)
            if reply.text:
                emit(db, turn.session_id, "assistant.message", {"text": reply.text}, turn_id=turn.id, at=now)
            for call in calls:
                db.add(call)
                self.reject_unusable(db, turn, call)
            if calls or steered_since(db, turn, seen):
                return False
            end_turn(self.rt, db, turn, db.get_one(Run, self.run_id), "completed", result=reply.text)
            return True

    def reject_unusable(self, db: DbSession, turn: Turn, call: ToolCall) -> None:
        """A call to a tool that does not exist, or with input that does not fit, fails at once."""
        tool = self.agent.tools.get(call.tool)
        try:
            if tool is None:
                raise LookupError(f"there is no tool named {call.tool}")
            tool.validate(call.input)
        except LookupError as exc:
            finish_call(self.rt, db, call, turn.session_id, "failed", None, {"code": "UNKNOWN_TOOL",
                                                                            "message": str(exc)})
        except ValueError as exc:
            finish_call(self.rt, db, call, turn.session_id, "failed", None, {"code": "INVALID_INPUT",
                                                                            "message": str(exc)})


def limit_request_id(turn: Turn) -> str:
    """Deterministic per violation: an old limit prompt can never answer a newer one."""
    return f"limit-{turn.id}-{turn.steps}"
