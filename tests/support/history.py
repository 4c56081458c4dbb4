"""Long histories without running every turn: completed turns written as the runner leaves them, many at once."""

from __future__ import annotations

from sqlalchemy import func, select

from engine.protocol import Principal
from engine.store.db import Database
from engine.store.tables import Message, Run, Session, Turn, utcnow


def add_turns(database: Database, session_id: str, count: int, who: Principal) -> list[str]:
    """Append `count` completed turns to the session, `question n` answered `answer n` (one run and two messages
    each), in one transaction; their ids, oldest first."""
    with database.write() as db:
        session = db.get_one(Session, session_id)
        first = db.execute(select(func.count()).select_from(Turn).where(Turn.session_id == session_id)).scalar_one() + 1
        now = utcnow()
        turns = [Turn(session_id=session_id, seq=seq, status="completed", requested_by=who.wire(),
                      input=f"question {seq}", result=f"answer {seq}", created_at=now, updated_at=now)
                 for seq in range(first, first + count)]
        db.add_all(turns)
        db.flush()
        for turn in turns:
            db.add(Run(turn_id=turn.id, seq=1, status="succeeded", started_at=now, ended_at=now))
            for role, content in (("user", turn.input), ("assistant", turn.result)):
                session.message_seq += 1
                db.add(Message(session_id=session_id, seq=session.message_seq, turn_id=turn.id, role=role,
                               content=content, principal=who.wire() if role == "user" else None, created_at=now))
        return [turn.id for turn in turns]
