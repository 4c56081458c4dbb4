"""Inbound items: stored once per platform id, then applied by a job (messages and responses)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sqlalchemy import select

from engine.channels.contract import Answers, Choice, Ignored, InboundItem, Message, read_item, stored_item
from engine.channels.inbound import accept
from engine.protocol import InputResponse, api_key_principal
from engine.store.tables import Inbound
from tests.conftest import Stack
from tests.support.agent import read_ledger, script

ALICE = api_key_principal("alice")


def test_a_message_item_starts_a_session_at_its_address_and_a_duplicate_changes_nothing(stack: Stack) -> None:
    item = Message("fake:room:1", script([("refund", {"charge_id": "ch_1", "amount": 1})]))
    assert accept(stack.rt, "fake", "evt-1", ALICE, b"{}", item) is True
    assert accept(stack.rt, "fake", "evt-1", ALICE, b"{}", item) is False
    stack.wait_idle()
    from engine.store.queries import list_sessions

    [session] = list_sessions(stack.rt)["sessions"]
    assert session["channel"] == "fake" and session["pendingRequests"] == 1
    with stack.rt.db.read() as db:
        [row] = db.execute(select(Inbound)).scalars().all()
        assert (row.external_id, row.duplicates, row.processed_at is not None) == ("evt-1", 1, True)

    accept(stack.rt, "fake", "evt-2", ALICE, b"{}", Message("fake:room:1", "approve"))
    stack.wait_idle()
    assert len(list_sessions(stack.rt)["sessions"]) == 1  # the same address continues the same session
    assert len(read_ledger()) == 1


def test_a_responses_item_settles_and_a_late_one_becomes_a_message(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
    [request] = stack.pending(sid)
    click = Answers((InputResponse(request_id=request["requestId"], option_id="approve"),))
    accept(stack.rt, "fake", "click-1", ALICE, b"{}", click)
    stack.wait_idle()
    assert len(read_ledger()) == 1
    late = Answers((InputResponse(request_id=request["requestId"], option_id="cancel"),))
    accept(stack.rt, "fake", "click-2", ALICE, b"{}", late)
    stack.wait_idle()
    turns = stack.history(sid)["turns"]
    assert len(turns) == 2 and "already closed (approved)" in turns[1]["input"]
    assert len(read_ledger()) == 1


def test_a_choice_item_picks_the_option_shown_at_its_position_when_applied(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
    [request] = stack.pending(sid)
    assert [o["id"] for o in request["options"]] == ["approve", "deny"]

    accept(stack.rt, "fake", "click-3", ALICE, b"{}", Choice(request["requestId"], 3))  # no third option
    accept(stack.rt, "fake", "click-4", ALICE, b"{}", Choice("req_unknown", 1))
    stack.wait_idle()
    assert stack.pending(sid) == [request]  # nothing changed; both kept for the audit trail
    with stack.rt.db.read() as db:
        assert db.execute(select(Inbound.processed_at.is_not(None))).scalars().all() == [True, True]

    accept(stack.rt, "fake", "click-5", ALICE, b"{}", Choice(request["requestId"], 2))
    stack.wait_idle()
    assert stack.pending(sid) == []
    assert stack.history(sid)["turns"][0]["status"] == "completed"
    assert read_ledger() == []  # option 2 is cancel: the refund never ran


APPROVE = InputResponse(request_id="req_1", option_id="approve")
STORED: list[tuple[InboundItem, dict[str, object]]] = [
    (Message("fake:room:1", "hi", ref="c:7", audit={"messageSid": "SM1"}),
     {"type": "message", "address": "fake:room:1", "text": "hi", "ref": "c:7", "messageSid": "SM1"}),
    (Answers((APPROVE,)), {"type": "responses", "responses": [APPROVE.wire()]}),
    (Choice("req_1", 2), {"type": "choice", "requestId": "req_1", "position": 2}),
    (Ignored("permission", ref="c:8", notice={"text": "why"}, once="o/r:1:7:permission"),
     {"type": "ignored", "why": "permission", "ref": "c:8", "notice": {"text": "why"}, "once": "o/r:1:7:permission"}),
    (Ignored("STOP"), {"type": "ignored", "why": "STOP"}),
]


@pytest.mark.parametrize(("item", "stored"), STORED)
def test_a_typed_item_is_stored_as_rows_have_always_held_it_and_read_back(item: InboundItem,
                                                                         stored: dict[str, object]) -> None:
    assert stored_item(item) == stored
    assert read_item(stored) == replace(item, audit={})  # the audit fields stay in the row, for people to read


def test_a_row_stored_before_items_were_typed_still_applies(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
    [request] = stack.pending(sid)
    with stack.rt.transaction() as db:  # as an older gateway wrote it: a dict, straight into the row
        db.add(Inbound(channel="fake", external_id="old-1", received_at=stack.rt.now(), principal=ALICE.wire(),
                       payload_digest="0" * 64, item={"type": "choice", "requestId": request["requestId"],
                                                      "position": 1}))
        db.flush()
        stack.rt.enqueue(db, "process_inbound", db.execute(select(Inbound.id)).scalar_one())
    stack.wait_idle()
    assert stack.pending(sid) == []
    assert [e["tool"] for e in read_ledger()] == ["refund"]
