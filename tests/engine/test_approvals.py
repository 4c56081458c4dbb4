"""Tool approvals end to end, on SQLite + in-process jobs and on PostgreSQL + a real RQ worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.orm import Session as DbSession

from engine.store.db import Database
from engine.store.tables import Turn
from tests.conftest import Stack, make_stack, recorded, sqlite_settings
from tests.engine.test_outbox import clicked
from tests.support.agent import read_ledger, script


def ran(tool: str) -> list[dict]:
    return [e for e in read_ledger() if e["tool"] == tool]


def test_approve_runs_the_tool_exactly_once(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 20})]))
    [request] = stack.pending(sid)
    assert request["kind"] == "tool-approval"
    assert request["prompt"] == "Approve refund?"
    assert [(o["id"], o["label"], o["style"]) for o in request["options"]] == [
        ("approve", "Approve", "primary"), ("deny", "Deny", "danger")]
    assert request["allowFreeform"] is False
    assert request["action"]["input"] == {"charge_id": "ch_1", "amount": 20}
    assert request["requestedBy"]["principalId"] == "alice"
    assert ran("refund") == []

    result = stack.answer(request["requestId"], "approve")

    assert result.status == "settled"
    [call] = ran("refund")
    assert call["charge_id"] == "ch_1"
    assert call["requester"] == "alice" and call["responder"] == "alice"
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "succeeded"]
    assert '"refunded": 20.0' in turn["result"]


@pytest.mark.parametrize("amount", [1e16, 2.5e300, -0.0])
def test_an_approved_call_runs_with_numbers_the_database_writes_its_own_way(stack: Stack, amount: float) -> None:
    """PostgreSQL's JSONB gives 1e16 back as 10000000000000000 and -0.0 as 0.0: the same input, not a changed
    one (its hash check failed the call with INPUT_CHANGED)."""
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": amount})]))
    [request] = stack.pending(sid)

    stack.answer(request["requestId"], "approve")

    assert [call["amount"] for call in ran("refund")] == [amount]
    assert "INPUT_CHANGED" not in stack.turn(sid)["result"]


def test_deny_with_a_note_never_runs_and_the_model_reads_the_note(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 900})]))
    [request] = stack.pending(sid)

    stack.answer(request["requestId"], "deny", text="too expensive")

    assert ran("refund") == []
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert "Denied by alice: too expensive" in turn["result"]
    [resolved] = stack.history(sid)["turns"][0]["requests"]
    assert resolved["outcome"] == "denied"
    assert resolved["response"] == {"optionId": "deny", "text": "too expensive"}
    rejected = [e for e in stack.events(sid) if e["type"] == "action.result"]
    assert rejected[0]["data"]["status"] == "rejected"
    assert rejected[0]["data"]["error"]["code"] == "TOOL_EXECUTION_DENIED"


def test_cancel_the_old_id_of_deny_still_denies(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
    [request] = stack.pending(sid)
    assert stack.answer(request["requestId"], "CANCEL").status == "settled"
    [resolved] = stack.history(sid)["turns"][0]["requests"]
    assert (resolved["outcome"], resolved["response"]) == ("denied", {"optionId": "deny", "text": None})
    assert ran("refund") == []


def test_free_call_runs_while_the_gated_one_waits(stack: Stack) -> None:
    sid, _ = stack.start(script([("lookup", {"order_id": "o-7"}), ("refund", {"charge_id": "ch_9", "amount": 5})]))

    assert [e["tool"] for e in read_ledger()] == ["lookup"]
    turn = stack.turn(sid)
    assert turn["status"] == "waiting"
    assert [r["status"] for r in turn["runs"]] == ["interrupted"]
    assert stack.event_types(sid) == [
        "message.received", "turn.started", "assistant.message", "input.requested",
        "action.called", "action.result", "turn.waiting",
    ]
    [request] = stack.pending(sid)

    stack.answer(request["requestId"], "approve")

    assert [e["tool"] for e in read_ledger()] == ["lookup", "refund"]
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "succeeded"]
    # the model was called again only once both calls had results: it saw both
    assert '"order": "o-7"' in turn["result"] and '"refunded": 5.0' in turn["result"]
    assert stack.event_types(sid)[7:] == [
        "approval.candidate", "approval.settled", "input.resolved", "turn.started", "action.called",
        "action.result", "assistant.message", "turn.completed", "session.waiting",
    ]


def test_once_grant_is_hidden_while_a_same_key_approval_is_pending(stack: Stack) -> None:
    sid, _ = stack.start(script(
        [("deploy", {"env": "staging"}), ("deploy", {"env": "prod"})],
        [("deploy", {"env": "canary"})],
    ))
    first, second = stack.pending(sid)

    stack.answer(first["requestId"], "approve")

    assert [e["env"] for e in ran("deploy")] == []  # nothing runs until the whole batch is settled
    [still] = stack.pending(sid)
    assert still["requestId"] == second["requestId"]

    stack.answer(second["requestId"], "approve")

    # both ran, then the third call of a later step ran without asking
    assert [e["env"] for e in ran("deploy")] == ["staging", "prod", "canary"]
    assert stack.pending(sid) == []
    assert stack.turn(sid)["status"] == "completed"
    assert len(stack.history(sid)["turns"][0]["requests"]) == 2


def test_once_needs_an_explicit_approve(stack: Stack) -> None:
    sid, _ = stack.start(script([("deploy", {"env": "a"})], [("deploy", {"env": "b"})]))
    [first] = stack.pending(sid)
    stack.answer(first["requestId"], "cancel")
    [second] = stack.pending(sid)  # a cancel grants nothing: the next call asks again
    assert second["action"]["input"] == {"env": "b"}


def test_custom_policy_status_forms(stack: Stack) -> None:
    forms = ["true", "false", "none", "not-applicable", "user-approval", "approved", "denied",
             "approved-dict", "denied-dict"]
    steps = [[("custom", {"form": f}), ("custom_async", {"form": f})] for f in forms]
    sid, _ = stack.start(script(*steps))

    asked = []
    while pending := stack.pending(sid):
        asked.extend(r["action"]["input"]["form"] for r in pending)
        for r in pending:
            stack.answer(r["requestId"], "approve", wait=False)
        stack.wait_idle()

    assert asked == ["true", "true", "user-approval", "user-approval"]
    ran_forms = sorted(e["form"] for e in read_ledger())
    expected = ["approved", "approved-dict", "false", "none", "not-applicable", "true", "user-approval"]
    assert ran_forms == sorted(expected * 2)
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert "Denied by policy: over the limit" in turn["result"]
    denied = [c for c in turn["toolCalls"] if c["status"] == "not_run"]
    assert sorted(c["input"]["form"] for c in denied) == ["denied", "denied", "denied-dict", "denied-dict"]


def test_an_async_request_policy_that_never_answers_leaves_the_call_to_a_person(request: pytest.FixtureRequest,
                                                                                tmp_path: Path) -> None:
    with make_stack(request, "sqlite", tmp_path, request_policy_timeout=0.5) as stack:
        sid, _ = stack.start(script([("custom_async", {"form": "hang"})]))  # cut off, not waited on for an hour
        [asked] = stack.pending(sid)
        assert asked["action"]["input"] == {"form": "hang"} and stack.turn(sid)["status"] == "waiting"
        stack.answer(asked["requestId"], "approve")
        assert [e["form"] for e in read_ledger()] == ["hang"]


def test_auto_reviewer(stack: Stack) -> None:
    verdicts = ("clear", "caution", "deny", "error", "garbage")
    sid, _ = stack.start(script([("reviewed", {"verdict": v}) for v in verdicts]))

    pending = stack.pending(sid)
    assert sorted(r["action"]["input"]["verdict"] for r in pending) == ["caution", "error", "garbage"]
    assert [e["verdict"] for e in ran("reviewed")] == ["clear"]
    assert ran("reviewed")[0]["note"] == "reviewer says clear"
    for r in pending:
        stack.answer(r["requestId"], "approve", wait=False)
    stack.wait_idle()
    assert sorted(e["verdict"] for e in ran("reviewed")) == ["caution", "clear", "error", "garbage"]
    assert "reviewer says deny" in stack.turn(sid)["result"]


def test_refused_responder_leaves_the_request_open(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(sid)
    before = len(stack.events(sid))

    result = stack.answer(request["requestId"], "approve", who="bob")

    assert result.status == "refused"
    assert result.reason == "only alice may answer this request"
    assert [r["requestId"] for r in stack.pending(sid)] == [request["requestId"]]
    assert ran("refund") == []
    tail = stack.events(sid)[before:]
    assert [(e["type"], e["data"].get("outcome")) for e in tail] == [
        ("approval.candidate", "pending"), ("approval.candidate", "rejected"), ("turn.waiting", None)]
    assert tail[1]["data"]["reason"] == "only alice may answer this request"

    assert stack.answer(request["requestId"], "approve", who="alice").status == "settled"
    assert len(ran("refund")) == 1
    candidates = stack.history(sid)["turns"][0]["requests"][0]["candidates"]
    assert [(c["responder"]["principalId"], c["outcome"]) for c in candidates] == [
        ("bob", "rejected"), ("alice", "allowed")]


def test_custom_response_policy(stack: Stack) -> None:
    sid, _ = stack.start(script([("payout", {"amount": 10})]))
    [request] = stack.pending(sid)

    refused = stack.answer(request["requestId"], "approve", who="alice")
    assert (refused.status, refused.reason) == ("refused", "only bob may approve payouts")

    assert stack.answer(request["requestId"], "approve", who="bob").status == "settled"
    [payout] = ran("payout")
    assert payout["requester"] == "alice" and payout["responder"] == "bob"


def test_the_default_policy_settles_in_the_transaction_that_stores_the_response(stack: Stack) -> None:
    """`requester_only` only compares principals: store, judge and settle commit once. A policy of the agent's
    runs between two commits, after its candidate is stored, so slow policy code can lose nothing."""
    commits: list[object] = []
    event.listen(stack.rt.db.engine, "commit", commits.append)
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})], [("payout", {"amount": 4})]))
    [refund] = stack.pending(sid)
    commits.clear()
    assert stack.answer(refund["requestId"], "approve", wait=False).status == "settled"
    assert len(commits) == 1

    stack.wait_idle()
    [payout] = stack.pending(sid)
    commits.clear()
    assert stack.answer(payout["requestId"], "approve", who="bob", wait=False).status == "settled"
    assert len(commits) == 2
    stack.wait_idle()
    events = stack.event_types(sid)
    assert events.count("approval.candidate") == 2 and events.count("approval.settled") == 2
    assert stack.turn(sid)["status"] == "completed"
    candidates = [c for r in stack.turn(sid)["requests"] for c in r["candidates"]]
    assert [c["outcome"] for c in candidates] == ["allowed", "allowed"]


def test_a_response_policy_can_wait_for_a_second_person(stack: Stack) -> None:
    sid, _ = stack.start(script([("wire_transfer", {"amount": 1000})]))
    [request] = stack.pending(sid)

    assert stack.answer(request["requestId"], "approve", who="alice").status == "pending"
    assert stack.answer(request["requestId"], "approve", who="alice").status == "pending"
    assert ran("wire_transfer") == []

    assert stack.answer(request["requestId"], "approve", who="bob").status == "settled"
    assert len(ran("wire_transfer")) == 1


def test_the_same_response_twice_has_one_effect(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 2})]))
    [request] = stack.pending(sid)
    stack.answer(request["requestId"], "approve")
    events = len(stack.events(sid))

    from engine.errors import RequestClosed

    try:
        stack.answer(request["requestId"], "approve")
    except RequestClosed as exc:
        assert "no longer open" in str(exc)
    else:
        raise AssertionError("a second answer to a closed request must be refused")
    assert len(ran("refund")) == 1
    assert len(stack.events(sid)) == events


def test_a_failing_tool_is_reported_to_the_model(stack: Stack) -> None:
    sid, _ = stack.start(script([("broken", {"reason": "disk full"}), ("nope", {})]))
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    results = {m["toolCallId"]: json.loads(m["content"]) for m in turn["messages"] if m["role"] == "tool"}
    broken, unknown = (results[c["callId"]]["error"] for c in turn["toolCalls"])
    assert broken["code"] == "TOOL_ERROR" and "disk full" in broken["message"]
    assert unknown["code"] == "UNKNOWN_TOOL"
    assert "disk full" in turn["result"]


def test_twenty_people_answer_at_once_and_exactly_one_settles(stack: Stack) -> None:
    import threading

    from engine.errors import RequestClosed

    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 7})]))
    [request] = stack.pending(sid)
    barrier = threading.Barrier(20)
    outcomes: list[str] = []

    def click() -> None:
        barrier.wait()
        try:
            outcomes.append(stack.answer(request["requestId"], "approve", wait=False).status)
        except RequestClosed:
            outcomes.append("closed")

    threads = [threading.Thread(target=click) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    stack.wait_idle()

    assert outcomes.count("settled") == 1
    assert sorted(set(outcomes) - {"settled"}) <= ["closed", "stale"]
    assert len(ran("refund")) == 1
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "succeeded"]
    candidates = turn["requests"][0]["candidates"]
    assert [c["outcome"] for c in candidates].count("allowed") == 1
    assert {c["outcome"] for c in candidates} <= {"allowed", "stale"}


def test_the_sessions_grants_are_read_only_for_a_policy_that_looks_at_them(tmp_path: Path) -> None:
    """`always()` never reads `ctx.approved_keys`: deciding its call costs no query of the grants; `once()` does."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    statements: list[str] = []
    event.listen(stack.rt.db.engine, "before_cursor_execute",
                 lambda _c, _cur, statement, *_: statements.append(statement))
    try:
        stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
        assert not [s for s in statements if "FROM approval_grants" in s]

        stack.start(script([("deploy", {"env": "staging"})]))
        assert [s for s in statements if "FROM approval_grants" in s]
    finally:
        stack.close()


def test_a_park_and_resume_cycle_stays_within_its_statement_budget(tmp_path: Path) -> None:
    """What one approval cycle costs the database (the bench's cycle throughput follows it): opening the
    session, the run that parks, then the answer and the run that ends the turn. A change that adds a
    statement or a commit to this path shows here first (on SQLite; PostgreSQL writes a transaction's messages,
    events and counters in one statement: tests/engine/test_numbering.py)."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    engine = stack.rt.db.engine
    try:
        with recorded(engine, "before_cursor_execute") as statements, recorded(engine, "commit") as commits, \
                recorded(DbSession, "after_flush") as flushes:
            sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 1})]))
        assert len(statements) <= 22  # (SQLite's BEGINs included)
        assert len(commits) == 3
        assert len(flushes) == 1  # the model's step: the turn's count, its call and the approval
        [request] = stack.pending(sid)

        with recorded(engine, "before_cursor_execute") as statements, recorded(engine, "commit") as commits, \
                recorded(DbSession, "after_flush") as flushes:
            stack.answer(request["requestId"], "approve")

        assert len(commits) == 4  # store+judge+settle, claim+start the call, its result, the model's answer
        assert len(statements) <= 39  # (whose person the responder is: asked with the request's read)
        assert len(flushes) == 1  # the turn's end (with its session's status)
        assert stack.turn(sid)["status"] == "completed"
    finally:
        stack.close()


def test_a_clicks_job_stays_within_its_statement_budget(tmp_path: Path) -> None:
    """What a channel click costs the database in its job (the bench's answer-to-completion path follows
    it): the answer stored, judged and settled, then the resumed turn run to its end in the same job."""
    db = Database(f"sqlite:///{tmp_path / 'click.db'}")
    db.upgrade()
    try:
        rt, dropped, [turn_id] = clicked(db, "ch_1")

        with recorded(db.engine, "before_cursor_execute") as statements, recorded(db.engine, "commit") as commits, \
                recorded(DbSession, "after_flush") as flushes:
            dropped.run(rt, "process_inbound")

        # the item read; store+judge+settle; claim+start the call; its result; the model's answer
        assert len(commits) == 5
        assert len(statements) <= 43  # (SQLite's BEGINs included)
        assert len(flushes) == 1  # the turn's end (with its session's status)
        with db.read() as session:
            assert session.get_one(Turn, turn_id).status == "completed"
    finally:
        db.dispose()
