"""Requests that do not rot: reminders, escalation and what expiry means, carried out by the sweep from rows with a
due time (engine/answers/timers.py), each once however many sweep, through a recording channel."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import select, text

from engine import ApprovalPolicy, always, ask_question, tool
from engine.answers import timers
from engine.answers.conversation import post_message
from engine.answers.submit import submit_responses
from engine.errors import ToolDefinitionError
from engine.jobs.recovery import sweep
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, Principal, api_key_principal
from engine.store.db import Database
from engine.store.queries import events_after
from engine.store.tables import ApprovalGrant, RequestTimer, Session
from engine.turns.sessions import open_session
from tests.conftest import Stack, sqlite_settings, truncate_all
from tests.engine.test_outbox import Dropped
from tests.engine.test_retention import plan, statements_of
from tests.support.agent import SECOND_PHONE, agent, read_ledger, script
from tests.support.fake_channel import RecordingChannel

OURS = "+15550001000"
BOB = Principal(authenticator="twilio", issuer="twilio:AC1", principal_type="user",
                principal_id=f"twilio:{SECOND_PHONE}", attributes={"userName": "bob"})
CAROL = Principal(authenticator="twilio", issuer="twilio:AC1", principal_type="user",
                  principal_id="twilio:+15550003333", attributes={"userName": "carol"})


class Phones(RecordingChannel):
    """A recording channel standing in for SMS: its addresses are numbers (`{"to": ...}`), as Twilio's."""

    def address(self, data: dict[str, Any]) -> str:
        return f"twilio:{OURS}:{data['to']}"


@dataclass
class Places:
    stack: Stack
    room: RecordingChannel
    phones: Phones

    def later(self, seconds: float) -> None:
        """This process's clock, `seconds` further on."""
        now = self.stack.rt.clock()
        self.stack.rt.clock = lambda: now + timedelta(seconds=seconds)

    def sweep(self) -> Any:
        report = sweep(self.stack.rt)
        self.stack.wait_idle()
        return report

    def start(self, tool_name: str, data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        """alice asks, in the room; the turn parks on the one request it opens."""
        opened = open_session(self.stack.rt, api_key_principal("alice"), channel="fake", address="fake:room:",
                              message=script([(tool_name, data)], final="done"))
        self.stack.wait_idle()
        [request] = self.stack.pending(opened.session_id)
        return opened.session_id, request


@pytest.fixture
def places(tmp_path: Path) -> Iterator[Places]:
    """SQLite with in-process jobs, a room (where alice asks) and phones (where requests escalate to)."""
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    room, phones = RecordingChannel(), Phones(name="twilio", one_at_a_time=True)
    stack.rt.channels.update(fake=room, twilio=phones)
    yield Places(stack, room, phones)
    stack.close()


def phone_session(places: Places) -> str:
    """The session at bob's phone, which the escalation opened."""
    with places.stack.rt.db.read() as db:
        return str(db.execute(select(Session.id).where(Session.channel == "twilio")).scalar_one())


def of(channel: RecordingChannel, kind: str) -> list[tuple[Any, ...]]:
    return [call for call in channel.calls if call[0] == kind]


def test_an_approval_reminds_every_interval_at_most_max_times(places: Places) -> None:
    sid, request = places.start("nudged_refund", {"amount": 5})
    card = f"ref-{places.room.calls.index(of(places.room, 'show')[0]) + 1}"  # what show() returned

    places.later(0.5)
    assert places.sweep().reminded == 0
    places.later(1.1)
    assert places.sweep().reminded == 1
    assert places.sweep().reminded == 0  # the next one is a second later
    places.later(2.2)
    assert places.sweep().reminded == 1
    places.later(60)
    assert places.sweep().reminded == 0  # at most two

    assert of(places.room, "remind") == [("remind", request["requestId"], 1, card),
                                         ("remind", request["requestId"], 2, card)]
    [now] = places.stack.pending(sid)
    assert now["reminded"] == 2 and now["escalatedAt"] is None and now["onTimeout"] is None
    reminded = [e["data"] for e in places.stack.events(sid) if e["type"] == "input.reminded"]
    assert reminded == [{"requestId": request["requestId"], "count": n, "max": 2, "approvers": []} for n in (1, 2)]


def test_reminders_stop_when_the_request_closes(places: Places) -> None:
    sid, request = places.start("nudged_refund", {"amount": 5})
    places.stack.answer(request["requestId"], "approve")
    places.later(1.5)
    assert places.sweep().reminded == 0
    assert of(places.room, "remind") == []
    with places.stack.rt.db.read() as db:
        assert db.execute(select(RequestTimer.due_at)).scalars().all() == [None]  # done: out of the index


def test_a_workflow_tools_question_reminds_too(places: Places) -> None:
    sid, request = places.start("nudged_survey", {})
    places.later(1.1)
    assert places.sweep().reminded == 1
    assert of(places.room, "remind")[0][:3] == ("remind", request["requestId"], 1)
    places.stack.answer(request["requestId"], "Blue")
    assert places.stack.turn(sid)["status"] == "completed"


def test_an_escalated_request_is_shown_at_its_place_and_its_approver_may_settle_it(places: Places) -> None:
    sid, request = places.start("escalated_refund", {"amount": 40})
    assert of(places.phones, "show") == []
    places.later(1.1)
    assert places.sweep().escalated == 1
    assert places.sweep().escalated == 0

    [show] = of(places.phones, "show")
    assert show[1] == request["requestId"]
    [escalated] = [e["data"] for e in places.stack.events(sid) if e["type"] == "input.escalated"]
    assert escalated == {"requestId": request["requestId"], "approvers": [f"twilio:{SECOND_PHONE}", "bob"],
                         "to": [{"channel": "twilio", "address": f"twilio:{OURS}:{SECOND_PHONE}"}]}
    assert [call[:3] for call in of(places.room, "refresh")] == [("refresh", request["requestId"], True)]
    [now] = places.stack.pending(sid)
    assert now["escalatedAt"] is not None
    [shown] = [e["data"] for e in places.stack.events(phone_session(places)) if e["type"] == "input.requested"]
    assert shown["escalatedFrom"] == sid and [r["requestId"] for r in shown["requests"]] == [request["requestId"]]

    [refused] = submit_responses(places.stack.rt, CAROL,
                                 [InputResponse(request_id=request["requestId"], option_id="approve")])
    assert refused.status == "refused"  # only the requester and the escalation's approvers
    [settled] = submit_responses(places.stack.rt, BOB,
                                 [InputResponse(request_id=request["requestId"], option_id="approve")])
    places.stack.wait_idle()
    assert settled.status == "settled"
    [ran] = read_ledger()
    assert (ran["tool"], ran["responder"]) == ("escalated_refund", f"twilio:{SECOND_PHONE}")
    assert [call[:3] for call in of(places.phones, "update")] == [("update", request["requestId"], "approved")]
    assert [call[:3] for call in of(places.room, "update")] == [("update", request["requestId"], "approved")]


def test_an_escalation_approver_with_an_api_key_is_asked_the_request_from_then_on(places: Places) -> None:
    sid, request = places.start("escalated_refund", {"amount": 40})
    bob = places.stack.client("bob")
    path = f"/api/requests/{request['requestId']}"
    assert bob.get(path).status_code == 404  # not his yet
    assert bob.patch(path, json={"optionId": "approve"}).status_code == 404
    places.later(1.1)
    places.sweep()
    assert [r["requestId"] for r in bob.get("/api/requests?status=pending").get_json()["requests"]] == \
        [request["requestId"]]
    assert bob.patch(path, json={"optionId": "approve"}).status_code == 200
    places.stack.wait_idle()
    assert read_ledger()[0]["responder"] == "bob"
    assert places.stack.client("carol").get(path).status_code == 404


def test_the_first_approver_keeps_the_right_after_an_escalation(places: Places) -> None:
    sid, request = places.start("escalated_refund", {"amount": 40})
    places.later(1.1)
    places.sweep()
    assert places.stack.answer(request["requestId"], "approve").status == "settled"
    assert read_ledger()[0]["responder"] == "alice"


def test_a_reply_at_the_escalation_place_answers_the_request(places: Places) -> None:
    sid, request = places.start("escalated_refund", {"amount": 40})
    places.later(1.1)
    places.sweep()
    phone = phone_session(places)

    posted = post_message(places.stack.rt, phone, BOB, "1")
    places.stack.wait_idle()
    assert (posted.effect, posted.turn_id) == ("answered", None)
    assert places.stack.turn(sid)["status"] == "completed"
    assert read_ledger()[0]["responder"] == f"twilio:{SECOND_PHONE}"
    # a message that answers nothing there is that person's own conversation
    assert post_message(places.stack.rt, phone, BOB, "hello").effect == "started"


def test_approved_on_timeout_runs_the_call_as_the_app(stack: Stack) -> None:
    sid, _ = stack.start(script([("lenient_refund", {"amount": 7})], final="done"))
    [request] = stack.pending(sid)
    assert request["onTimeout"] == "approve"
    now = stack.rt.clock()
    stack.rt.clock = lambda: now + timedelta(seconds=3)
    assert sweep(stack.rt).expired == 1
    stack.wait_idle()

    [ran] = read_ledger()
    assert (ran["responder"], ran["note"]) == ("app", "approved on timeout")
    turn = stack.turn(sid)
    [closed] = turn["requests"]
    assert (closed["outcome"], closed["responder"]["principalId"]) == ("approved", "app")
    assert closed["responder"]["attributes"] == {"reason": "approved on timeout"}
    assert '"approval": "approved on timeout"' in turn["result"]  # what the model read
    settled = [e["data"] for e in stack.events(sid) if e["type"] == "approval.settled"]
    assert [(s["outcome"], s["responder"]["principalId"]) for s in settled] == [("approved", "app")]
    with stack.rt.db.read() as db:
        assert db.execute(select(ApprovalGrant)).first() is None  # a grant takes a person's approve


def test_a_schedule_that_cannot_work_fails_where_it_is_defined() -> None:
    with pytest.raises(ToolDefinitionError, match="needs the request policy's expires_in"):
        tool(lambda amount: amount, name="x", approval=ApprovalPolicy(request=always(), on_timeout="approve"))
    for wrong, message in [
        ({"on_timeout": "dismiss"}, "tool-approval request is one of deny, approve"),
        ({"remind_every": 0}, "remind_every must be positive"),
        ({"remind_max": 2}, "remind_max needs remind_every"),
        ({"remind_every": 5, "remind_max": 0}, "remind_max must be a whole number"),
        ({"escalate_after": 60}, "escalate_after needs escalate_to"),
        ({"escalate_approvers": ["twilio:+1"]}, "need escalate_after"),
        ({"escalate_after": 60, "escalate_to": {"channel": "twilio"}}, "a place is"),
        ({"escalate_after": 60, "escalate_approvers": "twilio:+1"}, "list of principal ids"),
    ]:
        with pytest.raises(ValueError, match=message):
            ApprovalPolicy(request=always(), **wrong)
    with pytest.raises(ValueError, match="remind_max needs remind_every"):
        ask_question(remind_max=3)


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_each_reminder_and_escalation_happens_once_however_many_sweep(kind: str, request: pytest.FixtureRequest,
                                                                      tmp_path: Path) -> None:
    """Four sweeps at once (each its own thread and connection) over the same due timers."""
    if kind == "postgres":
        url = request.getfixturevalue("postgres_url")
        truncate_all(url)
    else:
        url = f"sqlite:///{tmp_path / 'hitl.db'}"
    database = Database(url)
    database.upgrade()
    dropped = Dropped()
    start = Runtime(database, agent, dropped).now() + timedelta(days=1)  # far from any worker's clock
    clock = {"now": start}
    rt = Runtime(database, agent, dropped, clock=lambda: clock["now"])
    try:
        opened = open_session(rt, api_key_principal("alice"), message=script(
            [("nudged_refund", {"amount": 1}), ("escalated_refund", {"amount": 2})]))
        dropped.run(rt, "run_turn")

        def all_sweep() -> None:
            threads = [threading.Thread(target=sweep, args=(rt,)) for _ in range(4)]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()

        for seconds in (1.5, 1.6, 2.7, 2.8, 9):
            clock["now"] = start + timedelta(seconds=seconds)
            all_sweep()
        types = [e["type"] for e in events_after(rt, opened.session_id)]
        assert types.count("input.reminded") == 2
        assert types.count("input.escalated") == 1
    finally:
        database.dispose()


def test_the_sweep_finds_due_timers_through_their_index_among_100k_waiting(postgres_url: str) -> None:
    """100,000 requests wait with a reminder due later: the sweep reads the few due rows from the partial index,
    never the whole table (EXPLAIN on PostgreSQL)."""
    truncate_all(postgres_url)
    database = Database(postgres_url)
    dropped = Dropped()
    rt = Runtime(database, agent, dropped)
    try:
        open_session(rt, api_key_principal("alice"), message=script([("nudged_refund", {"amount": 1})]))
        dropped.run(rt, "run_turn")
        with database.engine.begin() as conn:
            conn.execute(text(
                "INSERT INTO input_requests (request_id, session_id, turn_id, run_id, position, kind, prompt, options, "
                "allow_freeform, display, status, seq, created_at, reminded) SELECT '\\x00'::bytea || "
                "convert_to('req-' || g, 'UTF8'), r.session_id, r.turn_id, r.run_id, 0, r.kind, r.prompt, r.options, "
                "false, r.display, 'pending', 1 + g, now(), 0 FROM input_requests r, generate_series(1, 100000) g"))
            conn.execute(text(
                "INSERT INTO request_timers (request_id, kind, due_at, every, max) SELECT request_id, 'remind', "
                "now() + interval '1 hour' + seq * interval '1 second', 60, 3 FROM input_requests WHERE seq > 1"))
            conn.execute(text("ANALYZE input_requests"))
            conn.execute(text("ANALYZE request_timers"))
        [due] = statements_of(database, lambda: sweep(rt), "FROM request_timers JOIN input_requests")

        read = plan(database, due)
        assert "Index Scan using ix_request_timers_due_at on request_timers" in read, read
        assert "Seq Scan" not in read and "Sort" not in read, read
    finally:
        database.dispose()


def test_a_timer_that_fails_holds_up_no_other_and_fires_at_a_later_sweep(places: Places,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    opened = open_session(places.stack.rt, api_key_principal("alice"), channel="fake", address="fake:room:",
                          message=script([("escalated_refund", {"amount": 1}), ("nudged_refund", {"amount": 2})]))
    places.stack.wait_idle()
    assert len(places.stack.pending(opened.session_id)) == 2

    def down(*args: Any) -> str:
        raise RuntimeError("the database refused the place's session")

    monkeypatch.setattr(timers, "session_at", down)
    places.later(1.1)
    report = places.sweep()
    assert (report.escalated, report.reminded) == (0, 1)  # (the escalation fell due first)
    monkeypatch.undo()
    assert places.sweep().escalated == 1
