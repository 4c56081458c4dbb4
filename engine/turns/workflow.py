"""`ctx.ask()` and `ctx.step()`: a workflow tool parks the turn and, on resume, replays from the top."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session as DbSession

from engine.agent import Answer, Park
from engine.answers.input_requests import open_request
from engine.answers.places import announce
from engine.answers.schedules import Schedule
from engine.answers.showing import Showing
from engine.jobs.runtime import Runtime
from engine.policies import expiry
from engine.protocol import principal_or_none
from engine.store.statuses import Outcome, RequestStatus
from engine.store.tables import InputRequest, ToolCall, Turn


class CallWorkflow:
    """The asks and steps of one tool call, stored in the database. `fence` checks the runner still owns the turn."""

    def __init__(self, rt: Runtime, call: ToolCall, fence: Callable[[DbSession], Turn]) -> None:
        self.rt, self.turn_id, self.call_id, self.fence = rt, call.turn_id, call.call_id, fence
        self.asked = 0

    def ask(self, prompt: str, options: list[dict[str, Any]] | None, allow_freeform: bool,
            expires_in: float | timedelta | None, schedule: Schedule, shown: Showing) -> Answer:
        position = self.asked
        self.asked += 1
        with self.rt.db.read() as db:
            request = db.execute(
                select(InputRequest).where(InputRequest.turn_id == self.turn_id, InputRequest.call_id == self.call_id,
                                           InputRequest.position == position)
            ).scalar_one_or_none()
            if request is not None and request.status != RequestStatus.PENDING:
                response = request.response or {}
                return Answer(response.get("optionId"), response.get("text"),
                              principal_or_none(request.responder), request.outcome or Outcome.ANSWERED)
        if request is None:
            self.open_question(prompt, options, allow_freeform, expires_in, schedule, shown, position)
        raise Park(self.call_id)

    def open_question(self, prompt: str, options: list[dict[str, Any]] | None, allow_freeform: bool,
                      expires_in: float | timedelta | None, schedule: Schedule, shown: Showing,
                      position: int) -> None:
        choices = [{"id": o["label"], "label": o["label"], **({"description": o["description"]}
                                                               if o.get("description") else {})}
                   for o in options or []]
        with self.rt.transaction() as db:
            turn = self.fence(db)
            call = db.get_one(ToolCall, self.call_id)
            now = self.rt.now()
            request = open_request(
                db, session_id=turn.session_id, turn_id=turn.id, run_id=call.run_id, kind="question", prompt=prompt,
                options=choices, allow_freeform=allow_freeform or not choices,
                display="select" if choices else "text", requested_by=turn.requested_by, now=now,
                call_id=self.call_id, position=position, expires_at=expiry(expires_in, now), schedule=schedule,
                channels=self.rt.channels, shown=shown,
            )
            db.flush()
            announce(self.rt, db, turn.session_id, turn.id, [request], now)

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        with self.rt.db.read() as db:
            stored = dict(db.get_one(ToolCall, self.call_id).stored_steps or {})
        if name in stored:
            return stored[name]
        result = fn()
        json.dumps(result, allow_nan=False)  # a step's result must be storable (PostgreSQL refuses NaN)
        with self.rt.transaction() as db:
            self.fence(db)
            call = db.get_one(ToolCall, self.call_id)
            call.stored_steps = {**(call.stored_steps or {}), name: result}
        return result
