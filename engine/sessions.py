"""Sessions and the messages that start turns."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import func, select
from sqlalchemy.orm import Session as DbSession

from .errors import InvalidInput
from .protocol import Principal
from .runtime import Runtime
from .storage import new_id
from .tables import Session, Turn
from .turns import ACTIVE_TURN


@dataclass(frozen=True)
class Opened:
    session_id: str
    turn_id: str | None


def open_session(
    rt: Runtime, initiator: Principal | None, *, channel: str = "api", address: str | None = None,
    message: str | None = None,
) -> Opened:
    """Create a session; a message starts its first turn."""
    with rt.transaction() as db:
        session = Session(id=new_id("ses"), agent=rt.agent.name, channel=channel, address=address or "",
                          initiator=initiator.wire() if initiator else None, status="idle",
                          created_at=rt.now(), updated_at=rt.now())
        db.add(session)
        turn_id = queue_turn(rt, db, session, initiator, message, first=True) if message is not None else None
        return Opened(session.id, turn_id)


def queue_turn(rt: Runtime, db: DbSession, session: Session, principal: Principal | None, text: str, *,
               first: bool = False) -> str:
    """A new turn for `text`: enqueued now when the session has no active turn, else it waits its turn.
    `first`: the session is new in this transaction (it has no turn yet)."""
    text = text.replace("\x00", "")  # PostgreSQL text cannot hold NUL
    if not text.strip():
        raise InvalidInput("a message needs some text")
    seq, busy = 0, None
    if not first:
        seq = db.execute(
            select(func.coalesce(func.max(Turn.seq), 0)).where(Turn.session_id == session.id)).scalar_one()
        busy = db.execute(
            select(Turn.id).where(Turn.session_id == session.id, Turn.status.in_(ACTIVE_TURN)).limit(1)
        ).first()
    turn = Turn(id=new_id("turn"), session_id=session.id, seq=seq + 1, status="queued", input=text,
                requested_by=principal.wire() if principal else None, created_at=rt.now(), updated_at=rt.now())
    db.add(turn)
    if busy is None:
        session.status = "active"
        rt.enqueue(db, "run_turn", turn.id)
    return turn.id
