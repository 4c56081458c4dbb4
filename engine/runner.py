"""The turn runner: the model/tool loop of DESIGN.md section 5, one Run at a time, parking on people."""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.orm import Session as DbSession

from .agent import Approval, ToolContext
from .db import changed
from .events import add_message, emit
from .policies import ApprovalContext, SessionInfo, Verdict, call_policy, to_verdict
from .protocol import APP_PRINCIPAL, principal_or_none
from .requests import open_approval, request_wire
from .runtime import Runtime
from .tables import ApprovalGrant, InputRequest, Message, Run, Session, ToolCall, Turn, new_id
from .turns import ACTIVE_TURN, end_turn, latest_run, lock_turn, pending_requests

log = logging.getLogger(__name__)

DONE = ("completed", "failed", "not_run")


class LeaseLost(Exception):
    """Another runner owns the turn now (this one was presumed dead): stop without writing."""


def input_hash(data: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(data, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


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
        log.warning("turn %s: lease lost, leaving it to its new runner", turn_id)
    except Exception as exc:
        log.exception("turn %s failed", turn_id)
        fail(rt, turn_id, run_id, {"code": "TURN_ERROR", "message": f"{type(exc).__name__}: {exc}"})
    finally:
        keeper.stop()


def claim(rt: Runtime, turn_id: str) -> str | None:
    """Compare-and-set the turn from `queued` to `running` and open (or activate) its Run."""
    with rt.transaction() as db:
        turn = db.get(Turn, turn_id)
        if turn is None or turn.status != "queued":
            return None
        earlier = db.execute(
            select(Turn.id).where(
                Turn.session_id == turn.session_id, Turn.seq < turn.seq, Turn.status.in_(ACTIVE_TURN)
            )
        ).first()
        if earlier is not None:
            return None
        claimed = changed(db,
            update(Turn).where(Turn.id == turn_id, Turn.status == "queued")
            .values(status="running", lease_until=rt.lease_until(), updated_at=rt.now())
        )
        if claimed != 1:
            return None
        now = rt.now()
        db.get_one(Session, turn.session_id).status = "active"
        run = latest_run(db, turn_id)
        if run is not None and run.status == "resuming":
            run.status, run.started_at = "running", now
        else:
            run = Run(turn_id=turn_id, seq=1, status="running", started_at=now)
            db.add(run)
            principal = turn.requested_by
            add_message(db, turn.session_id, turn_id, "user", content=turn.input, principal=principal)
            emit(db, turn.session_id, "message.received", {"text": turn.input, "principal": principal},
                 turn_id=turn_id, at=now)
        db.flush()
        emit(db, turn.session_id, "turn.started", {"runId": run.id}, turn_id=turn_id, at=now)
        return run.id


def fail(rt: Runtime, turn_id: str, run_id: str, error: dict[str, Any]) -> None:
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        run = db.get_one(Run, run_id)
        if turn.status == "running" and run.status == "running":
            end_turn(rt, db, turn, run, "failed", error=error)


class LeaseKeeper:
    """Renews the running turn's lease so sweep() does not take it for a dead worker's."""

    def __init__(self, rt: Runtime, turn_id: str, run_id: str) -> None:
        self.rt, self.turn_id, self.run_id = rt, turn_id, run_id
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{turn_id}", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.rt.lease_seconds / 3):
            try:
                with self.rt.transaction() as db:
                    db.execute(
                        update(Turn).where(Turn.id == self.turn_id, Turn.status == "running")
                        .values(lease_until=self.rt.lease_until())
                    )
            except Exception:  # a missed renewal is retried; it must not kill the turn
                log.warning("turn %s: lease renewal failed", self.turn_id, exc_info=True)


@dataclass
class Decision:
    call_id: str
    verdict: Verdict


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
            with self.rt.db.read() as db:
                open_calls = list(
                    db.execute(
                        select(ToolCall).where(ToolCall.turn_id == self.turn_id, ToolCall.status.not_in(DONE))
                        .order_by(ToolCall.step, ToolCall.position)
                    ).scalars()
                )
            if open_calls:
                if self.work_on_calls(open_calls):
                    return
                continue
            if self.call_model():
                return

    # -- tool calls -------------------------------------------------------------------------------

    def work_on_calls(self, calls: list[ToolCall]) -> bool:
        """Decide proposed calls, run approved ones, then park if any still waits. True when parked."""
        proposed = [c for c in calls if c.status == "proposed"]
        if proposed:
            self.decide(proposed)
        unknown = [c for c in calls if c.status == "unknown"]
        if unknown:
            self.recover(unknown)
        for call_id in self.ready_calls():
            self.execute(call_id)
        return self.park_if_waiting()

    def ready_calls(self) -> list[str]:
        with self.rt.db.read() as db:
            return list(
                db.execute(
                    select(ToolCall.call_id).where(ToolCall.turn_id == self.turn_id, ToolCall.status == "approved")
                    .order_by(ToolCall.step, ToolCall.position)
                ).scalars()
            )

    def decide(self, calls: list[ToolCall]) -> None:
        with self.rt.db.read() as db:
            turn = db.get_one(Turn, self.turn_id)
            info = session_info(db.get_one(Session, turn.session_id))
            visible = self.visible_grants(db, turn.session_id)
        decisions: list[Decision] = []
        for call in calls:
            tool = self.agent.tools[call.tool]
            ctx = ApprovalContext(
                session=info, tool_name=call.tool, tool_input=call.input, approved_keys=frozenset(visible),
                call_id=call.call_id, approval_key=tool.approval_key,
            )
            try:
                verdict = to_verdict(call_policy(tool.request_policy, ctx))
            except Exception as exc:  # a broken policy must not run the call unreviewed
                log.warning("request policy of %s failed; asking a person", call.tool, exc_info=True)
                verdict = Verdict("user-approval", f"request policy error: {exc}")
            if verdict.decision == "user-approval":
                visible.discard(tool.approval_key)  # a grant is invisible while a same-key approval is pending
            decisions.append(Decision(call.call_id, verdict))
        self.record_decisions(decisions)

    def visible_grants(self, db: DbSession, session_id: str) -> set[str]:
        granted = set(
            db.execute(select(ApprovalGrant.approval_key).where(ApprovalGrant.session_id == session_id)).scalars()
        )
        pending_tools = db.execute(
            select(ToolCall.tool).join(InputRequest, InputRequest.request_id == ToolCall.approval_request_id)
            .where(InputRequest.session_id == session_id, InputRequest.status == "pending")
        ).scalars()
        for tool_name in pending_tools:
            tool = self.agent.tools.get(tool_name)
            granted.discard(tool.approval_key if tool else tool_name)
        return granted

    def record_decisions(self, decisions: list[Decision]) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            now = self.rt.now()
            opened: list[InputRequest] = []
            for decision in decisions:
                call = db.get_one(ToolCall, decision.call_id)
                verdict = decision.verdict
                if verdict.decision in ("not-applicable", "approved"):
                    call.status = "approved"
                    if verdict.decision == "approved":
                        call.responder = APP_PRINCIPAL.wire() | {"attributes": {"reason": verdict.reason}}
                elif verdict.decision == "denied":
                    note = f"Denied by policy: {verdict.reason}" if verdict.reason else "Denied by policy"
                    reject_call(self.rt, db, call, note, turn.session_id)
                else:
                    tool = self.agent.tools[call.tool]
                    opened.append(open_approval(
                        db, call, title=tool.title, session_id=turn.session_id,
                        requested_by=turn.requested_by, now=now,
                    ))
                call.updated_at = now
            if opened:
                db.flush()
                emit(db, turn.session_id, "input.requested", {"requests": [request_wire(r) for r in opened]},
                     turn_id=turn.id, at=now)

    def recover(self, calls: list[ToolCall]) -> None:
        """DESIGN.md rule 12: a call whose worker died while it ran."""
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            now = self.rt.now()
            opened = []
            for stale in calls:
                call = db.get_one(ToolCall, stale.call_id)
                tool = self.agent.tools[call.tool]
                if tool.idempotent:
                    call.status = "approved"
                elif tool.needs_approval:
                    opened.append(open_approval(
                        db, call, title=tool.title, session_id=turn.session_id, requested_by=turn.requested_by,
                        now=now, prompt=f"Approve {tool.title} again? An earlier attempt was interrupted "
                        "and may have partly run.",
                    ))
                else:
                    self.finish(db, call, turn.session_id, "failed", None, {
                        "code": "TOOL_INTERRUPTED",
                        "message": f"The worker running {call.tool} stopped; the call may have partly run "
                        "and was not retried.",
                    })
                call.updated_at = now
            if opened:
                db.flush()
                emit(db, turn.session_id, "input.requested", {"requests": [request_wire(r) for r in opened]},
                     turn_id=turn.id, at=now)

    def execute(self, call_id: str) -> None:
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            call = db.get_one(ToolCall, call_id)
            if call.status != "approved":
                return
            call.status, call.attempts, call.run_id = "running", call.attempts + 1, self.run_id
            call.updated_at = self.rt.now()
            emit(db, turn.session_id, "action.called",
                 {"callId": call.call_id, "toolName": call.tool, "input": call.input}, turn_id=turn.id,
                 at=self.rt.now())
            ctx = self.tool_context(db, turn, call)
            data, expected_hash, attempts = dict(call.input), call.input_hash, call.attempts
        tool = self.agent.tools[call.tool]
        output, error = None, None
        if input_hash(data) != expected_hash:
            error = {"code": "INPUT_CHANGED", "message": "the call's input differs from what was approved"}
        else:
            ctx.previous_attempt_may_have_run = attempts > 1
            try:
                output = tool.invoke(ctx, data)
                json.dumps(output)
            except Exception as exc:
                error = {"code": "TOOL_ERROR", "message": f"{type(exc).__name__}: {exc}"}
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            call = db.get_one(ToolCall, call_id)
            self.finish(db, call, turn.session_id, "failed" if error else "completed", output, error)

    def tool_context(self, db: DbSession, turn: Turn, call: ToolCall) -> ToolContext:
        approval = None
        if call.approval_request_id:
            request = db.get_one(InputRequest, call.approval_request_id)
            responder = principal_or_none(request.responder)
            if responder is not None:
                approval = Approval(request.request_id, responder, (request.response or {}).get("text"))
        elif call.responder:
            approval = Approval("policy", APP_PRINCIPAL, (call.responder.get("attributes") or {}).get("reason"))
        return ToolContext(
            session_id=turn.session_id, turn_id=turn.id, call_id=call.call_id,
            requester=principal_or_none(turn.requested_by), approval=approval,
            idempotency_key=f"idem_{call.call_id}",
        )

    def finish(
        self, db: DbSession, call: ToolCall, session_id: str, status: str, output: Any, error: dict[str, Any] | None
    ) -> None:
        call.status = status
        call.result = {"status": status, "output": output, "error": error}
        call.updated_at = self.rt.now()
        data: dict[str, Any] = {"callId": call.call_id, "status": status, "output": output}
        if error:
            data["error"] = error
        emit(db, session_id, "action.result", data, turn_id=call.turn_id, at=self.rt.now())
        content = json.dumps({"error": error} if error else output)
        add_message(db, session_id, call.turn_id, "tool", content=content, tool_call_id=call.call_id)

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

    def call_model(self) -> bool:
        """Ask the model for its next step; True when the turn ended."""
        with self.rt.db.read() as db:
            turn = db.get_one(Turn, self.turn_id)
            transcript = model_view(self.agent.instructions, load_messages(db, turn.session_id))
        reply = self.agent.model.complete(transcript, self.agent.tool_specs())
        with self.rt.transaction() as db:
            turn = self.fenced(db)
            now = self.rt.now()
            turn.steps += 1
            calls = []
            for position, request in enumerate(reply.tool_calls):
                call = ToolCall(
                    call_id=new_id("call"), turn_id=turn.id, run_id=self.run_id, step=turn.steps,
                    position=position, tool=request.name, input=dict(request.input),
                    input_hash=input_hash(dict(request.input)), status="proposed", created_at=now, updated_at=now,
                )
                calls.append(call)
            wire_calls = [
                {"id": c.call_id, "type": "function",
                 "function": {"name": c.tool, "arguments": json.dumps(c.input)}}
                for c in calls
            ]
            add_message(db, turn.session_id, turn.id, "assistant", content=reply.text, tool_calls=wire_calls or None)
            if reply.text:
                emit(db, turn.session_id, "assistant.message", {"text": reply.text}, turn_id=turn.id, at=now)
            for call in calls:
                db.add(call)
                if call.tool not in self.agent.tools:
                    self.finish(db, call, turn.session_id, "failed", None,
                                {"code": "UNKNOWN_TOOL", "message": f"there is no tool named {call.tool}"})
                    continue
                try:
                    self.agent.tools[call.tool].validate(call.input)
                except ValueError as exc:
                    error = {"code": "INVALID_INPUT", "message": str(exc)}
                    self.finish(db, call, turn.session_id, "failed", None, error)
            if calls:
                return False
            end_turn(self.rt, db, turn, db.get_one(Run, self.run_id), "completed", result=reply.text)
            return True


def reject_call(rt: Runtime, db: DbSession, call: ToolCall, note: str, session_id: str) -> None:
    """A call that will not run: `not_run`, a rejected action.result, and a denial the model reads."""
    error = {"code": "TOOL_EXECUTION_DENIED", "message": note}
    call.status = "not_run"
    call.result = {"status": "rejected", "output": None, "error": error}
    call.updated_at = rt.now()
    emit(db, session_id, "action.result", {"callId": call.call_id, "status": "rejected", "output": None,
                                           "error": error}, turn_id=call.turn_id, at=rt.now())
    add_message(db, session_id, call.turn_id, "tool", content=json.dumps({"error": error}), tool_call_id=call.call_id)


def load_messages(db: DbSession, session_id: str) -> list[Message]:
    return list(db.execute(select(Message).where(Message.session_id == session_id).order_by(Message.seq)).scalars())


def model_view(instructions: str, messages: list[Message]) -> list[dict[str, Any]]:
    """The transcript in OpenAI chat format; each call's result sits right after the message that made it."""
    results = {m.tool_call_id: m for m in messages if m.role == "tool"}
    view: list[dict[str, Any]] = [{"role": "system", "content": instructions}]
    for message in messages:
        if message.role == "tool":
            continue
        entry: dict[str, Any] = {"role": message.role, "content": message.content}
        if message.tool_calls:
            entry["tool_calls"] = message.tool_calls
        view.append(entry)
        for call in message.tool_calls or []:
            result = results.get(call["id"])
            if result is not None:
                view.append({"role": "tool", "tool_call_id": call["id"], "content": result.content})
    return view
