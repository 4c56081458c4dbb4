"""The turn runner: the model/tool loop of DESIGN.md section 5, one Run at a time, parking on people.

A Run alternates between bookkeeping and work. Bookkeeping (deciding calls, opening approvals, recording a
result, parking, ending) happens here, inside one fenced transaction per step; work (running a tool, calling the
model, judging its calls with a request policy that may take its time: engine/turns/work.py) happens between
transactions, so no lock is held while it runs. A tool's `running` mark commits before the tool starts and its
result commits before the model reads it.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session as DbSession

from engine.agent import Approval, ToolContext
from engine.answers.edits import input_hash
from engine.answers.input_requests import open_approval, open_request, opened_in
from engine.answers.options import CONTINUE, STOP
from engine.answers.places import announce
from engine.jobs.recovery import recover_turn, requeue
from engine.jobs.runtime import Runtime
from engine.protocol import APP_PRINCIPAL, Principal, app_reason, principal_or_none
from engine.store.db import lost_connection, write_row
from engine.store.events import add_message, emit
from engine.store.statuses import CALL_DONE, CallStatus, RequestStatus, ResultStatus, RunStatus, TurnStatus
from engine.store.tables import InputRequest, Run, Session, ToolCall, Turn
from engine.turns.call_policies import decide, record_verdict, recover
from engine.turns.calls import approval_note, finish_call, reject_unusable
from engine.turns.lease import LeaseKeeper
from engine.turns.transcript import load_messages, model_view, steered_since
from engine.turns.transitions import claim, end_turn, lock_turn, lock_turn_run, pending_requests
from engine.turns.work import CallModel, Done, ModelDone, RunTool, ToolDone, Work, call_model, run_tool
from engine.turns.workflow import CallWorkflow

log = logging.getLogger(__name__)

# built once (see turns/transitions.py)
_OPEN_CALLS = select(ToolCall).where(ToolCall.turn_id == bindparam("turn"), ToolCall.status.not_in(CALL_DONE)) \
    .order_by(ToolCall.step, ToolCall.position)
_RUN_INTERRUPTED = update(Run).where(Run.id == bindparam("run")) \
    .values(status=RunStatus.INTERRUPTED, ended_at=bindparam("now"))


class LeaseLost(Exception):
    """Another runner owns the turn now, or it was cancelled: stop without writing."""


def run_turn(rt: Runtime, turn_id: str) -> None:
    """Job body: claim the turn, drive it until it parks or ends. Safe to call twice."""
    driver = Driver(rt, turn_id)
    try:
        driver.drive()
    except LeaseLost:
        log.info("turn %s: no longer ours (cancelled, or presumed dead and recovered)", turn_id)
    except Exception as exc:
        if lost_connection(exc):
            driver.hand_back(exc)
            return
        log.exception("turn %s failed", turn_id)
        driver.save_unrecorded()
        run_id = driver.run_id
        if not driver.claimed:  # the claim rolled back with the first step: claim on its own, to fail the run
            with rt.transaction() as db:
                claimed = claim(rt, db, turn_id)
            if claimed is None:
                return
            run_id = claimed[1]
        fail(rt, turn_id, run_id, {"code": "TURN_ERROR", "message": f"{type(exc).__name__}: {exc}"})
    finally:
        driver.stop()


def fail(rt: Runtime, turn_id: str, run_id: str, error: dict[str, Any]) -> None:
    with rt.transaction() as db:
        turn = lock_turn(db, turn_id)
        if turn.status == TurnStatus.RUNNING and db.get_one(Run, run_id).status == RunStatus.RUNNING:
            end_turn(rt, db, turn, run_id, TurnStatus.FAILED, error=error)


class Driver:
    """Drives one Run of a turn. Every transaction first checks the run still owns the turn (fencing)."""

    def __init__(self, rt: Runtime, turn_id: str) -> None:
        self.rt, self.turn_id = rt, turn_id
        self.agent = rt.agent
        self.run_id = self.session_id = ""
        self.claimed = False
        """Whether this run's claim committed."""
        self.unrecorded: Done | None = None
        """The work done since the last commit, while the step that records it runs."""
        self.keeper: LeaseKeeper | None = None
        self.batch: list[str] | None = None
        """The approved calls this pass over the open calls still has to run; None between passes."""
        self.ran = False
        """Whether this pass started a call."""

    def fenced(self, db: DbSession) -> Turn:
        """Lock the session row, then the turn row (the order every writer uses), and check the run owns it."""
        locked = lock_turn_run(db, self.turn_id)
        if locked is None or locked[1].status != TurnStatus.RUNNING or locked[2] != self.run_id:
            raise LeaseLost(self.turn_id)
        return locked[1]

    def drive(self) -> None:
        """Claim the turn and take its first step in one transaction, then one transaction per step."""
        with self.rt.transaction() as db:
            claimed = claim(self.rt, db, self.turn_id)
            if claimed is None:
                return
            turn, self.run_id = claimed
            self.session_id = turn.session_id
            work = self.next_work(db, turn, [] if turn.steps == 0 else None)  # calls come from model steps
        self.claimed = True
        self.keeper = LeaseKeeper(self.rt, self.turn_id, self.run_id)
        self.keeper.start()
        while work is not None:
            with self.rt.riding():  # what the turn said so far reaches its channel if the work takes a while
                done = run_tool(work) if isinstance(work, RunTool) else call_model(self.rt, self.session_id, work)
            self.unrecorded = done
            with self.rt.transaction() as db:
                work = self.record(db, self.fenced(db), done)
            self.unrecorded = None

    def save_unrecorded(self) -> None:
        """After a failed step: a tool's result that the step did not commit is recorded on its own (the tool
        ran; its side effects are real), so the failed turn shows it. A call no longer running has it already
        (the step's commit went through, and only its answer was lost with the connection)."""
        done, self.unrecorded = self.unrecorded, None
        if not isinstance(done, ToolDone):
            return
        try:
            with self.rt.transaction() as db:
                turn = self.fenced(db)
                if db.get_one(ToolCall, done.call_id).status == CallStatus.RUNNING:
                    self.record_tool(db, turn, done)
        except Exception:
            log.exception("turn %s: could not record the result of call %s", self.turn_id, done.call_id)

    def hand_back(self, exc: Exception) -> None:
        """The run lost its database connection (a restart, a failover, a terminated backend): not the turn's
        fault, so the turn does not fail. What the tool did is recorded if the database answers again, and the
        turn goes back to the queue: to a new run if this one holds it (a call that was running and could not
        be recorded then needs a fresh approval, as after a crash), else as it was. If the database does not
        answer yet, the error stands: the job's retry, or the sweep once the lease runs out, brings it back."""
        log.warning("turn %s: the run lost its database connection (%s); the turn goes back to the queue",
                    self.turn_id, type(exc).__name__)
        self.stop()
        self.save_unrecorded()
        if not (self.run_id and recover_turn(self.rt, self.turn_id, given_up=self.run_id)):
            requeue(self.rt, self.turn_id)

    def stop(self) -> None:
        if self.keeper is not None:
            self.keeper.stop()

    def record(self, db: DbSession, turn: Turn, done: Done) -> Work | None:
        """Write what the last piece of work produced, then decide the next, in the same transaction."""
        if isinstance(done, ModelDone):
            return self.record_reply(db, turn, done)
        calls = self.open_calls(db)  # the recorded call is one of them: one read for both
        self.record_tool(db, turn, done)
        return self.next_work(db, turn, [c for c in calls if c.status not in CALL_DONE])

    def record_tool(self, db: DbSession, turn: Turn, done: ToolDone) -> None:
        call = db.get_one(ToolCall, done.call_id)
        if done.parked:
            write_row(db, call, status=CallStatus.AWAITING_INPUT, updated_at=self.rt.now())
        else:
            status = ResultStatus.FAILED if done.error else ResultStatus.COMPLETED
            note = approval_note(db, self.agent.tools[call.tool], call)
            finish_call(self.rt, db, call, turn.session_id, status, done.output, done.error, note=note)

    def next_work(self, db: DbSession, turn: Turn, known: list[ToolCall] | None = None) -> Work | None:
        """The next tool to run or model call to make; None when the turn parked or ended. `known`: the turn's
        open calls, when the caller has just read them (good for the first read only)."""
        while True:
            if self.batch:
                work = self.start_call(db, turn, self.batch.pop(0))
                if work is not None:
                    self.ran = True
                    return work
                continue
            idle, calls = False, None
            if self.batch is not None:  # the pass is over
                self.batch = None
                if self.ran:  # approvals that waited for a workflow tool of their step
                    calls = self.open_calls(db, known)
                    self.open_approvals(db, turn, calls)
                if self.park_if_waiting(db, turn):
                    return None
                idle = not self.ran
            if calls is None:  # (opening approvals closes no call: the list stands)
                calls = self.open_calls(db, known)
            known = None
            if not calls:
                return self.next_step(db, turn)
            if idle:
                raise RuntimeError("the turn has open tool calls but none to run and nothing to wait for")
            self.start_pass(db, turn, calls)

    def open_calls(self, db: DbSession, known: list[ToolCall] | None = None) -> list[ToolCall]:
        if known is not None:
            return known
        return list(db.execute(_OPEN_CALLS, {"turn": self.turn_id}).scalars())

    # -- tool calls -------------------------------------------------------------------------------

    def start_pass(self, db: DbSession, turn: Turn, calls: list[ToolCall]) -> None:
        """Decide new calls, recover interrupted ones, open approvals, and line up the approved calls."""
        undecided = [c for c in calls if c.status == CallStatus.PROPOSED and c.verdict is None]
        if undecided:
            decide(self.rt, db, turn.session_id, undecided)
        unknown = [c for c in calls if c.status == CallStatus.UNKNOWN]
        if unknown:
            self.announce(db, turn, recover(self.rt, db, turn, unknown))
        self.reopen_answered_asks(db, calls)
        self.open_approvals(db, turn, calls)
        self.batch = [c.call_id for c in calls if c.status == CallStatus.APPROVED]
        self.ran = False

    def open_approvals(self, db: DbSession, turn: Turn, calls: list[ToolCall]) -> None:
        """Approvals decided but not yet asked, among the turn's open `calls`; those of a step whose workflow
        tool has not finished come later."""
        decided = [c for c in calls if c.status == CallStatus.PROPOSED and c.verdict is not None]
        if not decided:
            return
        asking = {c.step for c in calls  # a tool with a ctx may still ctx.ask()
                  if c.status == CallStatus.AWAITING_INPUT
                  or (c.status in (CallStatus.APPROVED, CallStatus.RUNNING) and self.agent.tools[c.tool].takes_context)}
        now, opened = self.rt.now(), []
        for call in decided:
            if call.step in asking:
                continue
            opened.append(open_approval(db, call, self.agent.tools[call.tool], session_id=turn.session_id,
                                        requested_by=turn.requested_by, now=now, channels=self.rt.channels))
        self.announce(db, turn, opened)

    def announce(self, db: DbSession, turn: Turn, opened: list[InputRequest]) -> None:
        if opened:
            announce(self.rt, db, turn.session_id, turn.id, opened, self.rt.now())

    def reopen_answered_asks(self, db: DbSession, calls: list[ToolCall]) -> None:
        """A workflow call whose questions are all answered runs again from the top."""
        for call in calls:
            if call.status != CallStatus.AWAITING_INPUT:
                continue
            open_asks = db.execute(select(func.count()).select_from(InputRequest).where(
                InputRequest.turn_id == call.turn_id, InputRequest.call_id == call.call_id,
                InputRequest.status == RequestStatus.PENDING)).scalar_one()
            if not open_asks:
                call.status = CallStatus.APPROVED

    def start_call(self, db: DbSession, turn: Turn, call_id: str) -> RunTool | None:
        """Mark an approved call `running` (committed before the tool starts); None if it is no longer approved."""
        call = db.get_one(ToolCall, call_id)
        if call.status != CallStatus.APPROVED:
            return None
        if call.attempts == 0 or call.interrupted:
            emit(db, turn.session_id, "action.called",
                 {"callId": call.call_id, "toolName": call.tool, "input": call.input}, turn_id=turn.id,
                 at=self.rt.now())
        write_row(db, call, status=CallStatus.RUNNING, attempts=call.attempts + 1, run_id=self.run_id,
                  updated_at=self.rt.now())
        return RunTool(call.call_id, self.agent.tools[call.tool], dict(call.input), call.input_hash,
                       self.tool_context(db, turn, call))

    def tool_context(self, db: DbSession, turn: Turn, call: ToolCall) -> ToolContext:
        approval = None
        if call.approval_request_id:  # a person approved it, or the app on timeout (`authorise_call` keeps who; a
            # person's approve has no note)
            if call.responder:
                responder = Principal.model_validate(call.responder)
                approval = Approval(call.approval_request_id, responder, app_reason(responder))
        elif call.responder:
            approval = Approval("policy", APP_PRINCIPAL, (call.responder.get("attributes") or {}).get("reason"))
        session = db.get_one(Session, turn.session_id)
        return ToolContext(
            session_id=turn.session_id, turn_id=turn.id, call_id=call.call_id,
            requester=principal_or_none(turn.requested_by), approval=approval,
            idempotency_key=f"idem_{call.call_id}", channel=session.channel,
            previous_attempt_may_have_run=call.interrupted > 0,
            workflow=CallWorkflow(self.rt, call, self.fenced),
        )

    def park_if_waiting(self, db: DbSession, turn: Turn) -> bool:
        if not opened_in(db, self.turn_id) and not pending_requests(db, self.turn_id):
            return False
        now = self.rt.now()
        # on the connection: no early flush (the step's rows go out with the turn's state, in one flush)
        db.connection().execute(_RUN_INTERRUPTED, {"run": self.run_id, "now": now})
        write_row(db, turn, status=TurnStatus.WAITING, lease_until=None, updated_at=now)
        emit(db, turn.session_id, "turn.waiting", {"on": "input"}, turn_id=turn.id, at=now)
        return True

    # -- the model ----------------------------------------------------------------------------------

    def next_step(self, db: DbSession, turn: Turn) -> CallModel | None:
        """The model's next step, unless the step budget is spent (then ask to continue, or stop)."""
        if turn.step_budget is None or turn.steps < turn.step_budget:
            messages = load_messages(db, turn.session_id)
            return CallModel(model_view(self.agent.instructions, messages), messages[-1].seq if messages else 0)
        limit = db.get(InputRequest, limit_request_id(turn))
        # a `continue` raised the budget; anything else stops
        if limit is not None and limit.status == RequestStatus.RESOLVED:
            end_turn(self.rt, db, turn, self.run_id, TurnStatus.CANCELLED)
            return None
        if limit is None:
            request = open_request(
                db, session_id=turn.session_id, turn_id=turn.id, run_id=self.run_id, kind="session-limit",
                prompt=f"The agent has taken {turn.steps} steps on this request. Let it continue?",
                options=[CONTINUE, STOP], allow_freeform=False, display="confirmation",
                requested_by=turn.requested_by, now=self.rt.now(), request_id=limit_request_id(turn),
            )
            self.announce(db, turn, [request])
        if not self.park_if_waiting(db, turn):
            raise RuntimeError("the step-limit prompt is neither pending nor resolved")
        return None

    def record_reply(self, db: DbSession, turn: Turn, done: ModelDone) -> Work | None:
        """Store the model's step; end the turn when it made no call and nobody steered meanwhile."""
        now, reply = self.rt.now(), done.reply
        turn.steps += 1
        calls = [
            ToolCall(call_id=done.call_ids[position], turn_id=turn.id, run_id=self.run_id, step=turn.steps,
                     position=position, tool=request.name, input=dict(request.input),
                     input_hash=input_hash(dict(request.input)), status=CallStatus.PROPOSED, created_at=now,
                     updated_at=now)
            for position, request in enumerate(reply.tool_calls)
        ]
        wire_calls = [{"id": c.call_id, "type": "function",
                       "function": {"name": c.tool, "arguments": json.dumps(c.input)}} for c in calls]
        add_message(db, turn.session_id, turn.id, "assistant", content=reply.text, tool_calls=wire_calls or None)
        if reply.text:
            emit(db, turn.session_id, "assistant.message", {"text": reply.text}, turn_id=turn.id, at=now)
        for call in calls:
            db.add(call)
            reject_unusable(self.rt, db, self.agent, call, turn.session_id)
        for call in calls:  # (judged before this transaction; the usable calls only)
            if call.call_id in done.verdicts:
                record_verdict(self.rt, db, turn.session_id, call, done.verdicts[call.call_id])
        if calls or steered_since(db, turn, done.seen):  # (the model was asked with no call open: these are all)
            return self.next_work(db, turn, [c for c in calls if c.status not in CALL_DONE])
        end_turn(self.rt, db, turn, self.run_id, TurnStatus.COMPLETED, result=reply.text)
        return None


def limit_request_id(turn: Turn) -> str:
    """Deterministic per violation: an old limit prompt can never answer a newer one."""
    return f"limit-{turn.id}-{turn.steps}"
