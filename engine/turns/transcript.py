"""The transcript the model reads: messages in OpenAI chat format, each call's result after its call."""

from __future__ import annotations

from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.orm import Session as DbSession

from engine.store.events import committed_message_seq, insert_messages
from engine.store.tables import Message, Turn

# built once (see turns/transitions.py)
_STEER = select(Message.seq).where(
    Message.session_id == bindparam("session"), Message.seq > bindparam("seen"), Message.role == "user").limit(1)
_MESSAGES = select(Message).where(Message.session_id == bindparam("session")).order_by(Message.seq)


def steered_since(db: DbSession, turn: Turn, seen: int) -> bool:
    """Did the turn's person send a message while the model was thinking? Then the model reads it first.
    When the transaction holds the session, its counter answers for the usual case, no message since `seen`,
    without a statement. A steer is committed by another transaction, so this one's pending changes need no
    flush first (they go out with the next, in fewer statements)."""
    last = committed_message_seq(db, turn.session_id)
    if last is not None and last <= seen:
        return False
    with db.no_autoflush:
        return db.execute(_STEER, {"session": turn.session_id, "seen": seen}).first() is not None


def load_messages(db: DbSession, session_id: str) -> list[Message]:
    insert_messages(db)
    return list(db.execute(_MESSAGES, {"session": session_id}).scalars())


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
