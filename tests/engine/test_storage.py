"""How a parked turn is stored: the small JSON it repeats (principals, in columns and in `message.received`,
a request's action, built-in options) goes in without its keys, and every read shows it whole, on SQLite and
on PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, type_coerce
from sqlalchemy.orm import InstrumentedAttribute

from engine.tables import APPROVE, CANCEL, Event, InputRequest, JSONType, Turn
from engine.tables import Session as SessionRow
from tests.conftest import Stack
from tests.support.agent import script


def stored(stack: Stack, column: InstrumentedAttribute[Any], where: Any) -> Any:
    """The column's JSON as the database holds it, in the one row `where` finds."""
    with stack.rt.db.read() as db:
        return db.execute(select(type_coerce(column, JSONType)).where(where)).scalar_one()


def test_an_approval_stores_its_principals_action_and_options_compactly(stack: Stack) -> None:
    message = script([("refund", {"charge_id": "ch_1", "amount": 20})])
    sid, _ = stack.start(message)
    [request] = stack.pending(sid)
    alice = request["requestedBy"]
    identity = [alice["authenticator"], alice["issuer"], alice["principalType"], "alice"]
    in_request = InputRequest.request_id == request["requestId"]

    assert stored(stack, InputRequest.options, in_request) == ["approve", "cancel"]
    assert stored(stack, InputRequest.action, in_request) == [
        "tool-call", request["action"]["callId"], "refund", {"charge_id": "ch_1", "amount": 20}]
    assert stored(stack, InputRequest.requested_by, in_request) == identity + ([alice["attributes"]]
                                                                                 if alice["attributes"] else [])
    assert stored(stack, Turn.requested_by, Turn.session_id == sid) == stored(stack, SessionRow.initiator,
                                                                              SessionRow.id == sid)
    assert request["options"] == [{**APPROVE, "description": None}, {**CANCEL, "description": None}]
    assert request["action"] == {"kind": "tool-call", "callId": request["action"]["callId"], "toolName": "refund",
                                 "input": {"charge_id": "ch_1", "amount": 20}}
    assert stack.history(sid)["initiator"] == alice
    received = (Event.session_id == sid) & (Event.type == "message.received")
    assert stored(stack, Event.data, received) == {"text": message, "principal": stored(stack, Turn.requested_by,
                                                                                          Turn.session_id == sid)}
    assert [e["data"] for e in stack.events(sid) if e["type"] == "message.received"] == [
        {"text": message, "principal": alice}]

    stack.answer(request["requestId"], "approve")

    [resolved] = stack.history(sid)["turns"][0]["requests"]
    assert resolved["responder"] == alice
    assert stored(stack, InputRequest.responder, in_request) == stored(stack, InputRequest.requested_by, in_request)


def test_a_question_stores_its_own_options_whole(stack: Stack) -> None:
    sid, _ = stack.start(script([("survey", {"topic": "mug"})]))
    [question] = stack.pending(sid)

    assert stored(stack, InputRequest.options, InputRequest.request_id == question["requestId"]) == [
        {"id": "Red", "label": "Red"}, {"id": "Blue", "label": "Blue"}]
    assert [o["label"] for o in question["options"]] == ["Red", "Blue"]
