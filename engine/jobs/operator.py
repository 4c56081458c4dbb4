"""Operator actions on stuck work (the CLI's `hitl resume`): the manual form of what sweep() does."""

from __future__ import annotations

from engine.errors import Conflict, NotFound
from engine.jobs.runtime import Runtime
from engine.store.statuses import TurnStatus
from engine.store.tables import Turn
from engine.turns.transitions import blocking_turn, lock_turn, pending_requests, schedule_resume


def resume_turn(rt: Runtime, turn_id: str) -> str:
    """Re-enqueue a stuck turn: `resumed` (waiting, nothing pending) or `requeued` (queued); else Conflict."""
    with rt.transaction() as db:
        if db.get(Turn, turn_id) is None:
            raise NotFound(f"no turn {turn_id!r}", {"turnId": turn_id})
        turn = lock_turn(db, turn_id)
        if turn.status == TurnStatus.WAITING:
            if schedule_resume(rt, db, turn):
                return "resumed"
            open_requests = pending_requests(db, turn_id)
            raise Conflict(f"turn {turn_id} is waiting on {open_requests} open request(s); answer them "
                           "(`hitl requests --status pending`) and it resumes by itself", {"turnId": turn_id})
        if turn.status == TurnStatus.QUEUED:
            earlier = blocking_turn(db, turn)
            if earlier is not None:
                raise Conflict(f"turn {turn_id} waits for turn {earlier.id} ({earlier.status}) of its session "
                               "to end", {"turnId": turn_id})
            turn.updated_at = rt.now()
            rt.enqueue(db, "run_turn", turn_id)
            return "requeued"
        raise Conflict(f"turn {turn_id} is {turn.status}: only a waiting or queued turn can be resumed"
                       + ("; `hitl sweep` recovers a running one once its lease runs out"
                          if turn.status == TurnStatus.RUNNING else ""), {"turnId": turn_id})
