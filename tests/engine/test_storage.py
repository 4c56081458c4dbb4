"""How a parked turn is stored: the small JSON it repeats (principals, in columns and in `message.received`,
a request's action, built-in options, the model's calls, a call's verdict) goes in without its keys, and
every read shows it whole, on SQLite and on PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select, type_coerce
from sqlalchemy.orm import InstrumentedAttribute

from engine.answers.options import APPROVE, DENY
from engine.store.storage import ID_PREFIXES, JSONType, new_id, pack_id, unpack_id
from engine.store.tables import Event, InputRequest, Message, ToolCall, Turn
from engine.store.tables import Session as SessionRow
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

    assert stored(stack, InputRequest.options, in_request) == ["approve", "cancel"]  # Deny by its old id
    assert stored(stack, InputRequest.action, in_request) == [
        "tool-call", request["action"]["callId"], "refund", {"charge_id": "ch_1", "amount": 20}]
    assert stored(stack, InputRequest.requested_by, in_request) == identity + ([alice["attributes"]]
                                                                                 if alice["attributes"] else [])
    assert stored(stack, Turn.requested_by, Turn.session_id == sid) == stored(stack, SessionRow.initiator,
                                                                              SessionRow.id == sid)
    assert request["options"] == [{**APPROVE, "description": None}, {**DENY, "description": None}]
    assert request["action"] == {"kind": "tool-call", "callId": request["action"]["callId"], "toolName": "refund",
                                 "input": {"charge_id": "ch_1", "amount": 20}, "inputSchema": None}
    assert stack.history(sid)["initiator"] == alice
    with stack.rt.db.read() as db:  # a session opened without an address stores none, and shows one
        assert db.scalar(select(SessionRow.stored_address).where(SessionRow.id == sid)) == ""
    assert stack.history(sid)["address"] == f"api:{sid}:"
    received = (Event.session_id == sid) & (Event.type == "message.received")
    assert stored(stack, Event.data, received) == {"text": message, "principal": stored(stack, Turn.requested_by,
                                                                                          Turn.session_id == sid)}
    assert [e["data"] for e in stack.events(sid) if e["type"] == "message.received"] == [
        {"text": message, "principal": alice}]

    call_id = request["action"]["callId"]
    in_reply = (Message.session_id == sid) & (Message.role == "assistant")
    assert stored(stack, Message.tool_calls, in_reply) == [[call_id, "refund", '{"charge_id": "ch_1", "amount": 20}']]
    assert stored(stack, ToolCall.verdict, ToolCall.call_id == call_id) == ["user-approval", None]
    [reply] = [m for m in stack.history(sid)["turns"][0]["messages"] if m["role"] == "assistant"]
    assert reply["toolCalls"] == [{"id": call_id, "type": "function",
                                   "function": {"name": "refund", "arguments": '{"charge_id": "ch_1", "amount": 20}'}}]

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


def test_postgres_packs_our_ids_to_17_bytes_and_keeps_any_other_string_whole() -> None:
    ours = [new_id(prefix) for prefix in ID_PREFIXES]
    others = ["ses_nope", ours[0].upper(), "ses_" + "b" * 25 + "7", f"limit-{ours[1]}-3", "", "é", "req_" + "a" * 27]

    assert [len(pack_id(i)) for i in ours] == [17] * len(ours)
    assert [unpack_id(pack_id(i)) for i in ours + others] == ours + others
    assert [pack_id(i) for i in others] == [b"\x00" + i.encode() for i in others]
