"""Questions, workflow tools, typed replies, steer and queue, stale answers, cancel, limits, expiry (issue 3)."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from engine.answers import conversation
from engine.answers.conversation import cancel_turn, post_message, receive_responses
from engine.answers.submit import ResponseResult, submit_responses
from engine.errors import NotPermitted
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, Principal, api_key_principal, operator_principal
from engine.store.db import Database
from engine.store.queries import events_after, session_history
from engine.turns.sessions import open_session
from tests.conftest import Stack
from tests.engine.test_outbox import Dropped
from tests.support.agent import MAX_STEPS, read_ledger, script, started, steered, thinking, wait_for
from tests.support.agent import agent as test_agent

COLORS = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}, {"label": "Green"}]})


def tool_results(stack: Stack, sid: str, turn: int = 1) -> list[dict]:
    t = stack.turn(sid, turn)
    by_call = {m["toolCallId"]: json.loads(m["content"]) for m in t["messages"] if m["role"] == "tool"}
    return [by_call[c["callId"]] for c in t["toolCalls"] if c["callId"] in by_call]


# -- ask_question -----------------------------------------------------------------------------------------


def test_a_question_shows_every_option_and_allows_free_text(stack: Stack) -> None:
    sid, _ = stack.start(script([COLORS]))
    [question] = stack.pending(sid)
    assert question["kind"] == "question" and question["prompt"] == "Which color?"
    assert question["display"] == "select" and question["allowFreeform"] is True
    assert question["options"] == [
        {"id": "Red", "label": "Red", "description": "warm", "style": None},
        {"id": "Blue", "label": "Blue", "description": "cool", "style": None},
        {"id": "Green", "label": "Green", "description": None, "style": None}]
    assert question["action"] is None
    assert stack.turn(sid)["status"] == "waiting"


@pytest.mark.parametrize(("typed", "answer"), [("Blue", "Blue"), ("2", "Blue"), ("bLuE", "Blue"),
                                               ("  teal, please ", "teal, please")])
def test_a_typed_reply_answers_the_question(stack: Stack, typed: str, answer: str) -> None:
    sid, _ = stack.start(script([COLORS]))
    posted = stack.say(sid, typed)
    assert posted.effect == "answered"
    assert tool_results(stack, sid) == [{"status": "answered", "answer": answer}]
    assert stack.turn(sid)["status"] == "completed"
    types = stack.event_types(sid)
    received = types.index("message.received", 1)
    assert types[received:received + 3] == ["message.received", "approval.candidate", "input.resolved"]


def test_pressing_an_option_answers_with_it(stack: Stack) -> None:
    sid, _ = stack.start(script([COLORS]))
    [question] = stack.pending(sid)
    assert stack.answer(question["requestId"], "Green").status == "settled"
    assert tool_results(stack, sid) == [{"status": "answered", "answer": "Green"}]


def test_a_question_without_options_takes_text(stack: Stack) -> None:
    sid, _ = stack.start(script([("ask_question", {"question": "Your name?"})]))
    [question] = stack.pending(sid)
    assert (question["display"], question["options"], question["allowFreeform"]) == ("text", [], True)
    stack.say(sid, "Ada")
    assert tool_results(stack, sid) == [{"status": "answered", "answer": "Ada"}]


@pytest.mark.parametrize("options", [[{"label": "Only"}], [{"label": "A"}, {"label": "a"}],
                                     [{"label": x} for x in "ABCD"]])
def test_a_bad_question_is_a_tool_error_not_a_crash(stack: Stack, options: list) -> None:
    sid, _ = stack.start(script([("ask_question", {"question": "Pick", "options": options})]))
    [result] = tool_results(stack, sid)
    assert result["error"]["code"] == "TOOL_ERROR"
    assert stack.pending(sid) == []
    assert stack.turn(sid)["status"] == "completed"


def test_two_open_questions_and_a_typed_reply_answers_only_the_first(stack: Stack) -> None:
    second = ("ask_question", {"question": "Which size?", "options": [{"label": "S"}, {"label": "L"}]})
    sid, _ = stack.start(script([COLORS, second]))
    first_q, second_q = stack.pending(sid)
    stack.say(sid, "1")
    [still] = stack.pending(sid)
    assert still["requestId"] == second_q["requestId"]
    stack.say(sid, "1")
    assert tool_results(stack, sid) == [{"status": "answered", "answer": "Red"}, {"status": "answered", "answer": "S"}]


def test_nobody_to_ask_means_unavailable(stack: Stack) -> None:
    from engine.protocol import APP_PRINCIPAL

    opened = open_session(stack.rt, APP_PRINCIPAL, message=script([COLORS]))
    stack.wait_idle()
    assert tool_results(stack, opened.session_id) == [{"status": "unavailable"}]


# -- workflow tools -------------------------------------------------------------------------------------


def test_a_workflow_tool_asks_twice_and_its_step_runs_once_across_three_resumes(stack: Stack) -> None:
    sid, _ = stack.start(script([("survey", {"topic": "shirt"})]))
    stack.say(sid, "blue")
    stack.say(sid, "2")
    [comment] = stack.pending(sid)
    assert (comment["prompt"], comment["display"]) == ("Any comment?", "text")
    stack.say(sid, "looks great")

    ledger = [e for e in read_ledger() if e["tool"] == "survey"]
    assert [e["phase"] for e in ledger] == ["ticket", "done"]
    assert ledger[1] | {"callId": None, "idempotencyKey": None} == ledger[1] | {
        "color": "Blue", "size": "L", "comment": "looks great", "callId": None, "idempotencyKey": None}
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted"] * 3 + ["succeeded"]
    assert tool_results(stack, sid) == [{"ticket": "T-shirt", "color": "Blue", "size": "L",
                                         "comment": "looks great", "dismissed": []}]


def test_a_tool_that_asks_then_fails(stack: Stack) -> None:
    sid, _ = stack.start(script([("ask_then_fail", {})]))
    stack.say(sid, "no thanks")
    [result] = tool_results(stack, sid)
    assert result["error"]["code"] == "TOOL_ERROR" and "failed after No thanks" in result["error"]["message"]
    assert stack.turn(sid)["status"] == "completed"


def test_approvals_of_a_step_wait_for_its_workflow_tool(stack: Stack) -> None:
    sid, _ = stack.start(script([("survey", {"topic": "mug"}), ("refund", {"charge_id": "ch_1", "amount": 2})]))
    assert [r["kind"] for r in stack.pending(sid)] == ["question"]
    stack.say(sid, "Red")
    stack.say(sid, "S")
    assert [r["kind"] for r in stack.pending(sid)] == ["question"]
    stack.say(sid, "none")
    [approval] = stack.pending(sid)
    assert approval["kind"] == "tool-approval"
    stack.say(sid, "approve")
    assert stack.turn(sid)["status"] == "completed"
    assert [e["tool"] for e in read_ledger()] == ["survey", "survey", "refund"]


# -- typed replies to approvals ----------------------------------------------------------------------------


@pytest.mark.parametrize(("typed", "ran"), [("1", True), ("approve", True), ("Approve", True), ("2", False),
                                            ("deny", False), ("Deny", False), ("cancel", False)])
def test_typed_replies_settle_an_approval(stack: Stack, typed: str, ran: bool) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    assert stack.say(sid, typed).effect == "answered"
    assert bool([e for e in read_ledger() if e["tool"] == "refund"]) is ran
    assert stack.turn(sid)["requests"][0]["outcome"] == ("approved" if ran else "denied")


@pytest.mark.parametrize("typed", ["cancel: too expensive", "deny too expensive"])
def test_a_typed_denial_carries_its_note(stack: Stack, typed: str) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    stack.say(sid, typed)
    [result] = tool_results(stack, sid)
    assert result["error"]["message"] == "Denied by alice: too expensive"


def test_cancel_with_words_is_free_text_to_a_question_whose_option_is_cancel(stack: Stack) -> None:
    """A denial note is an approval's: to a question it is an answer (it was an option with text, refused as
    bad input, so a channel's message was never applied)."""
    sid, _ = stack.start(script([("ask_question", {"question": "Ship it?", "options": [
        {"label": "ship"}, {"label": "cancel"}]})]))
    assert stack.say(sid, "cancel, wrong address").effect == "answered"
    assert tool_results(stack, sid) == [{"status": "answered", "answer": "cancel, wrong address"}]


@pytest.mark.parametrize("typed", ["yes", "0x1", "1e0", "3", "ok go"])
def test_text_that_matches_nothing_steers_and_never_approves(stack: Stack, typed: str) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    assert stack.say(sid, typed).effect == "steered"
    assert read_ledger() == []
    turn = stack.turn(sid)
    assert turn["requests"][0]["outcome"] == "ignored"
    assert turn["status"] == "completed"
    assert [m["content"] for m in turn["messages"] if m["role"] == "user"][-1] == typed


def test_steering_keeps_answers_already_given_in_the_batch(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "a", "amount": 1}),
                                 ("refund", {"charge_id": "b", "amount": 2})]))
    first, second = stack.pending(sid)
    stack.answer(first["requestId"], "approve")
    stack.say(sid, "actually, stop there")
    outcomes = [r["outcome"] for r in stack.turn(sid)["requests"]]
    assert outcomes == ["approved", "ignored"]
    assert [e["charge_id"] for e in read_ledger()] == ["a"]


def test_queue_policy_with_a_held_approval_still_steers(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    assert stack.say(sid, "something else", turn_policy="queue").effect == "steered"
    assert len(stack.history(sid)["turns"]) == 1


def start_running(stack: Stack, seconds: float = 1.5) -> str:
    """A turn whose tool is still running when the test goes on."""
    opened = open_session(stack.rt, api_key_principal("alice"), message=script([("slow_sync", {"seconds": seconds})]))
    wait_for(started("slow_sync"), what="the tool to start")
    return opened.session_id


def test_queue_policy_waits_for_the_running_turn_to_end(stack: Stack) -> None:
    sid = start_running(stack)
    posted = stack.say(sid, script(final="second turn"), turn_policy="queue")
    assert posted.effect == "queued"
    turns = stack.history(sid)["turns"]
    assert [t["status"] for t in turns] == ["completed", "completed"]
    assert turns[1]["result"] == "second turn"


def test_steering_a_running_turn_makes_the_model_read_the_message_next(stack: Stack) -> None:
    sid = start_running(stack)
    assert stack.say(sid, "use the express option").effect == "steered"
    [turn] = stack.history(sid)["turns"]
    assert turn["status"] == "completed"
    assert turn["result"] == "noted: use the express option"


def test_a_steer_sent_while_the_model_answers_is_read_before_the_turn_ends(stack: Stack) -> None:
    opened = open_session(stack.rt, api_key_principal("alice"), message=script(final="first answer", think=True))
    wait_for(thinking, what="the model to start its answer")
    posted = post_message(stack.rt, opened.session_id, api_key_principal("alice"), "use the express option", "steer")
    steered()
    stack.wait_idle()

    assert posted.effect == "steered"
    [turn] = stack.history(opened.session_id)["turns"]
    assert turn["status"] == "completed"
    assert turn["result"] == "noted: use the express option"  # the answer that missed the steer was not the end
    assert [m for m in stack.events(opened.session_id) if m["type"] == "assistant.message"][0]["data"] == {
        "text": "first answer"}


def test_a_turn_waiting_for_its_worker_to_resume_is_steered_and_told_of_late_answers(stack: Stack) -> None:
    """Between an answer and the run it resumes, the turn is queued but has started: its person's message
    steers it, and a late answer is a message to it (both started a turn of their own after it)."""
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(sid)
    with stack.rt.following() as resumes:  # the resumed run waits until both arrived
        stack.answer(request["requestId"], "approve", wait=False)
        assert stack.turn(sid)["status"] == "queued"
        posted = post_message(stack.rt, sid, api_key_principal("alice"), "use express shipping")
        receive_responses(stack.rt, api_key_principal("bob"),
                          [InputResponse(request_id=request["requestId"], option_id="cancel")])
    stack.rt.push(resumes)
    stack.wait_idle()

    assert posted.effect == "steered"
    [turn] = stack.history(sid)["turns"]
    assert turn["status"] == "completed"
    said = [m["content"] for m in turn["messages"] if m["role"] == "user"][1:]
    assert said[0] == "use express shipping" and "already closed (approved)" in said[1]
    assert [e["tool"] for e in read_ledger()] == ["refund"]


def test_a_message_from_someone_else_waits_for_the_turn_to_end(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    posted = stack.say(sid, script(final="bob's turn"), who="bob")
    assert posted.effect == "queued"
    turns = stack.history(sid)["turns"]
    assert [t["status"] for t in turns] == ["waiting", "queued"]
    assert turns[0]["requests"][0]["status"] == "pending"

    stack.say(sid, "approve")

    turns = stack.history(sid)["turns"]
    assert [t["status"] for t in turns] == ["completed", "completed"]
    assert turns[1]["result"] == "bob's turn"
    assert turns[1]["requestedBy"]["principalId"] == "bob"


# -- stale answers -----------------------------------------------------------------------------------------


def test_a_typed_answer_overtaken_by_another_becomes_a_late_answer(stack: Stack,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    sid, _ = stack.start(script([COLORS]))
    [request] = stack.pending(sid)

    def bob_first(rt: Runtime, principal: Principal, responses: list[InputResponse]) -> list[ResponseResult]:
        """Bob's click lands between alice's message being read and her answer being submitted."""
        submit_responses(rt, operator_principal("bob"), [InputResponse(request_id=request["requestId"],
                                                                       option_id="Red")])
        return submit_responses(rt, principal, responses)

    monkeypatch.setattr(conversation, "submit_responses", bob_first)
    with stack.rt.following() as resumes:  # the resumed run waits until both arrived
        posted = post_message(stack.rt, sid, api_key_principal("alice"), "Blue")
    stack.rt.push(resumes)
    stack.wait_idle()

    assert posted.effect == "noted"  # not lost, not an error: the turn hears of it
    [turn] = stack.history(sid)["turns"]
    assert turn["requests"][0]["response"]["optionId"] == "Red"
    said = [m["content"] for m in turn["messages"] if m["role"] == "user"]
    assert 'answered "Blue" to "Which color?"' in said[-1] and "already closed (answered)" in said[-1]


def test_a_late_answer_authorizes_nothing_and_becomes_a_message(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(sid)
    stack.answer(request["requestId"], "cancel")

    receive_responses(stack.rt, api_key_principal("alice"),
                      [InputResponse(request_id=request["requestId"], option_id="approve")])
    stack.wait_idle()

    assert read_ledger() == []
    turns = stack.history(sid)["turns"]
    assert len(turns) == 2
    assert 'answered "Approve" to "Approve refund?"' in turns[1]["input"]
    assert "already closed (denied)" in turns[1]["input"]


def test_the_same_click_twice_is_ignored(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(sid)
    click = [InputResponse(request_id=request["requestId"], option_id="approve")]
    receive_responses(stack.rt, api_key_principal("alice"), click)
    stack.wait_idle()
    events = len(stack.events(sid))
    receive_responses(stack.rt, api_key_principal("alice"), click)
    stack.wait_idle()
    assert len(stack.events(sid)) == events
    assert len(stack.history(sid)["turns"]) == 1


# -- cancel --------------------------------------------------------------------------------------------------


def test_cancel_a_waiting_turn(stack: Stack) -> None:
    sid, _ = stack.start(script([("lookup", {"order_id": "o"}), ("refund", {"charge_id": "ch_1", "amount": 3})],
                                [("lookup", {"order_id": "never"})]))
    before = len(stack.events(sid))
    cancel_turn(stack.rt, sid, api_key_principal("alice"))
    stack.wait_idle()
    tail = stack.events(sid)[before:]
    assert [e["type"] for e in tail] == ["input.resolved", "action.result", "turn.cancelled", "session.waiting"]
    assert tail[0]["data"]["resolutions"][0]["outcome"] == "cancelled"
    assert tail[1]["data"]["status"] == "cancelled"
    turn = stack.turn(sid)
    assert turn["status"] == "cancelled"
    assert [r["status"] for r in turn["runs"]] == ["interrupted"]
    assert [e["tool"] for e in read_ledger()] == ["lookup"]


def test_only_the_turns_person_or_an_operator_may_cancel_it(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    with pytest.raises(NotPermitted, match="only alice or an operator may cancel"):
        cancel_turn(stack.rt, sid, api_key_principal("bob"))  # closing alice's approval without its policy
    assert [r["status"] for r in stack.pending(sid)] == ["pending"]
    cancel_turn(stack.rt, sid, operator_principal("ops"))
    stack.wait_idle()
    assert stack.turn(sid)["status"] == "cancelled"
    anonymous, _ = stack.start(script([("refund", {"charge_id": "ch_2", "amount": 3})]), who=None)
    cancel_turn(stack.rt, anonymous, api_key_principal("bob"))  # an anonymous person's turn: anyone verified
    stack.wait_idle()
    assert stack.turn(anonymous)["status"] == "cancelled"


def test_a_refused_answer_while_the_turn_runs_does_not_say_the_turn_waits(stack: Stack) -> None:
    opened = open_session(stack.rt, api_key_principal("alice"), message=script(
        [("ask_question", {"question": "Your name?"}), ("slow_sync", {"seconds": 2})]))
    wait_for(started("slow_sync"), what="the tool to start")
    [request] = stack.pending(opened.session_id)
    assert stack.answer(request["requestId"], text="Bob", who="bob", wait=False).status == "refused"
    stack.wait_idle()
    types = stack.event_types(opened.session_id)
    # the turn was running: it says it waits once, when it parks after the tool, not at bob's refusal too
    assert types.count("turn.waiting") == 1
    assert types.index("approval.candidate") < types.index("action.result") < types.index("turn.waiting")


def test_cancel_during_a_running_tool(stack: Stack) -> None:
    opened = open_session(stack.rt, api_key_principal("alice"),
                          message=script([("slow_sync", {"seconds": 3})], [("lookup", {"order_id": "after"})]))
    wait_for(started("slow_sync"), what="the tool to start")
    cancel_turn(stack.rt, opened.session_id, api_key_principal("alice"))
    stack.wait_idle()
    import time

    time.sleep(3.5)  # the tool finishes; its result must be dropped
    stack.wait_idle()
    sid = opened.session_id
    types = stack.event_types(sid)
    assert types[-2:] == ["turn.cancelled", "session.waiting"]
    results = [e["data"] for e in stack.events(sid) if e["type"] == "action.result"]
    assert [r["status"] for r in results] == ["cancelled"]
    assert stack.turn(sid)["status"] == "cancelled"
    assert [e["tool"] for e in read_ledger() if e.get("phase") != "end"] == ["slow_sync"]


def test_cancelling_a_turn_that_never_started_leaves_the_session_idle(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'cancel.db'}")
    db.upgrade()
    executor = Dropped()  # the turn's job is lost: it stays queued
    rt = Runtime(db, test_agent, executor)
    try:
        opened = open_session(rt, api_key_principal("alice"), message="hello")

        cancel_turn(rt, opened.session_id, api_key_principal("alice"))

        assert [job for job, _ in executor.pushed] == ["run_turn"]  # the open's push; nothing for the cancelled turn
        assert [e["type"] for e in events_after(rt, opened.session_id)][-2:] == ["turn.cancelled", "session.waiting"]
        history = session_history(rt, opened.session_id)
        assert history["status"] == "idle"
        assert [t["status"] for t in history["turns"]] == ["cancelled"]
    finally:
        db.dispose()


def test_nothing_to_cancel_is_a_conflict(stack: Stack) -> None:
    from engine.errors import Conflict

    sid, _ = stack.start(script(final="done"))
    with pytest.raises(Conflict):
        cancel_turn(stack.rt, sid, api_key_principal("alice"))


# -- session limits ------------------------------------------------------------------------------------------


def long_script() -> str:
    return script(*[[("lookup", {"order_id": f"o{i}"})] for i in range(MAX_STEPS + 2)], final="all looked up")


def test_a_turn_past_its_step_budget_asks_to_continue(stack: Stack) -> None:
    sid, turn_id = stack.start(long_script())
    [limit] = stack.pending(sid)
    assert limit["kind"] == "session-limit"
    assert [o["id"] for o in limit["options"]] == ["continue", "stop"]
    assert limit["requestId"] == f"limit-{turn_id}-{MAX_STEPS}"
    assert len(read_ledger()) == MAX_STEPS

    stack.say(sid, "continue")

    assert len(read_ledger()) == MAX_STEPS + 2  # nothing done before ran again
    turn = stack.turn(sid)
    assert turn["status"] == "completed" and turn["result"].startswith("all looked up")


def test_stop_at_the_step_budget_cancels_the_turn(stack: Stack) -> None:
    sid, _ = stack.start(long_script())
    [limit] = stack.pending(sid)
    stack.answer(limit["requestId"], "stop")
    assert stack.turn(sid)["status"] == "cancelled"
    assert stack.event_types(sid)[-2:] == ["turn.cancelled", "session.waiting"]


def test_a_message_during_the_limit_prompt_is_answered_after_continue(stack: Stack) -> None:
    sid, _ = stack.start(long_script())
    assert stack.say(sid, "and also check o99").effect == "noted"
    assert stack.pending(sid)[0]["kind"] == "session-limit"
    stack.say(sid, "1")
    turn = stack.turn(sid)
    assert turn["status"] == "completed"
    users = [m["content"] for m in turn["messages"] if m["role"] == "user"]
    assert users[-1] == "and also check o99"


def test_a_message_from_someone_else_during_the_limit_prompt_waits_for_the_turn_to_end(stack: Stack) -> None:
    """Only the turn's own person's words join it; bob's were read by the model inside alice's turn."""
    sid, _ = stack.start(long_script())
    assert stack.say(sid, script(final="bob's turn"), who="bob").effect == "queued"
    stack.say(sid, "1")
    first, second = stack.history(sid)["turns"]
    assert first["result"].startswith("all looked up")
    assert [m["content"] for m in first["messages"] if m["role"] == "user"] == [long_script()]
    assert second["result"] == "bob's turn" and second["requestedBy"]["principalId"] == "bob"


# -- expiry ---------------------------------------------------------------------------------------------------


def later(stack: Stack, minutes: float) -> None:
    now = stack.rt.clock()
    stack.rt.clock = lambda: now + timedelta(minutes=minutes)


def test_an_unanswered_question_expires_and_the_tool_hears_dismissed(stack: Stack) -> None:
    sid, _ = stack.start(script([COLORS]))
    later(stack, 29)
    assert sweep(stack.rt).expired == 0
    later(stack, 2)
    assert sweep(stack.rt).expired == 1
    stack.wait_idle()
    assert tool_results(stack, sid) == [{"status": "dismissed"}]
    assert stack.turn(sid)["requests"][0]["outcome"] == "expired"


def test_an_expired_approval_counts_as_denied_and_a_late_answer_is_stale(stack: Stack) -> None:
    sid, _ = stack.start(script([("refund", {"charge_id": "ch_1", "amount": 3})]))
    [request] = stack.pending(sid)
    assert request["expiresAt"] is not None
    later(stack, 11)
    sweep(stack.rt)
    stack.wait_idle()
    [result] = tool_results(stack, sid)
    assert result["error"]["message"] == "Expired: nobody answered in time"
    receive_responses(stack.rt, api_key_principal("alice"),
                      [InputResponse(request_id=request["requestId"], option_id="approve")])
    stack.wait_idle()
    assert read_ledger() == []
    assert "already closed (expired)" in stack.history(sid)["turns"][-1]["input"]


def test_the_embedded_server_sweeps_by_itself(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import sqlite_settings

    stack = Stack("sqlite", sqlite_settings(tmp_path, sweep_seconds=0.2))
    try:
        sid, _ = stack.start(script([COLORS]))
        later(stack, 31)
        wait_for(lambda: not stack.pending(sid), timeout=10, what="the sweeper to expire the question")
        stack.wait_idle()
        assert tool_results(stack, sid) == [{"status": "dismissed"}]
    finally:
        stack.close()
