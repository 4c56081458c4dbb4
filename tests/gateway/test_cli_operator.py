"""The operator commands `hitl sessions`, `hitl show`, `hitl resume` (and `hitl answer --text`), in-process.

The CLI and the app share one SQLite file: the app sets up conversations, the CLI inspects and repairs them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from engine.answers.external import NewRequest, open_external_request
from engine.answers.settlement import close_request
from engine.defaults import HISTORY_TURNS
from engine.jobs.runtime import Runtime
from engine.protocol import api_key_principal
from engine.turns.sessions import open_session
from gateway.cli import main
from tests.conftest import TEST_AGENT, Stack
from tests.support.agent import read_ledger, script
from tests.support.history import add_turns

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])
LOOKUP = script([("lookup", {"order_id": "o-1"})], final="looked up")
QUESTION = script([("ask_question", {"question": "Which plan?", "options": [{"label": "Basic"}, {"label": "Pro"}]})])

Hitl = Callable[..., tuple[int, str]]


@pytest.fixture
def hitl(capsys: pytest.CaptureFixture[str]) -> Hitl:
    """Run `hitl ARGV...`; returns its exit code and what it printed (stdout, or the message it exited with)."""

    def run(*argv: str) -> tuple[int, str]:
        capsys.readouterr()
        try:
            main(list(argv))
        except SystemExit as exc:
            return (1, exc.code) if isinstance(exc.code, str) else (exc.code or 0, capsys.readouterr().out)
        return 0, capsys.readouterr().out

    return run


@pytest.fixture
def app(embedded: Stack) -> Stack:
    """The app over the CLI's database: one SQLite file, the test agent, in-process jobs; it runs the turns the
    CLI resumes."""
    return embedded


def ran(tool: str) -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == tool]


class LostJobs:
    """An executor whose queue loses every job it is given (Redis flushed after the push)."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        pass

    def waiting_since(self) -> datetime | None:
        return None  # it cannot tell: the outbox sweep pushes after its interval


def test_sessions_lists_newest_first_with_their_open_requests(hitl: Hitl, app: Stack) -> None:
    done_sid, _ = app.start(LOOKUP)
    waiting_sid, _ = app.start(REFUND)

    code, out = hitl("sessions")

    assert code == 0
    header, *rows = out.splitlines()
    assert header.split() == ["SESSION", "STATUS", "CHANNEL", "PENDING", "CREATED"]
    assert [row.split()[:4] for row in rows] == [[waiting_sid, "active", "api", "1"], [done_sid, "idle", "api", "0"]]
    assert hitl("sessions", "--limit", "1")[1].count("ses_") == 1
    assert hitl("sessions", "--before", waiting_sid)[1].count("ses_") == 1  # the page after the newest


def test_sessions_with_a_bad_cursor_prints_only_the_error(app: Stack, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["sessions", "--before", "ses_nope"])

    assert exited.value.code == "hitl: `before` names no session"
    assert capsys.readouterr().out == ""  # no table header over nothing


@pytest.mark.parametrize("command", ["sessions", "requests"])
@pytest.mark.parametrize("limit", ["-1", "1.5", "ten", "501", "99999999999"])
def test_lists_take_the_limits_the_api_takes(app: Stack, command: str, limit: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """A negative LIMIT is no limit on SQLite and an error on PostgreSQL: refused before either sees it; a page is
    at most 500 rows, as in the API."""
    with pytest.raises(SystemExit) as exited:
        main([command, "--limit", limit])

    assert exited.value.code == 2
    assert f"argument --limit: an integer from 0 to 500, not '{limit}'" in capsys.readouterr().err


def test_show_tells_the_story_of_a_refused_then_approved_refund(hitl: Hitl, app: Stack) -> None:
    sid, turn_id = app.start(REFUND)
    [request] = app.pending(sid)
    assert app.answer(request["requestId"], "approve", who="bob").status == "refused"
    app.answer(request["requestId"], "approve", who="alice")

    code, out = hitl("show", sid)

    assert code == 0
    lines = [line.strip() for line in out.splitlines()]
    assert lines[0].startswith(f"session {sid}  idle  agent {TEST_AGENT}  channel api")  # where it comes from
    assert f"turn 1 {turn_id}  completed  by alice (api-key)" in lines
    assert [line.split()[:3] for line in lines if line.startswith("run ")] == [
        ["run", "1", "interrupted"], ["run", "2", "succeeded"]]
    assert f"request {request['requestId']} tool-approval: Approve refund?  [approved by alice (api-key)]" in lines
    responses = [line for line in lines if line.startswith("response from")]
    assert responses[0].startswith("response from bob (api-key): approve -> rejected (")
    assert responses[1] == "response from alice (api-key): approve -> allowed"
    assert 'call refund {"charge_id": "ch_1", "amount": 20} -> completed' in lines


def test_show_lists_the_requests_of_agents_elsewhere_after_the_turns(hitl: Hitl, app: Stack) -> None:
    opened = open_external_request(app.rt, api_key_principal("bot", "agent"), NewRequest(
        kind="tool-approval", tool_name="refund_charge", tool_input={"charge": "ch_1"}, approvers=["carol"]))
    rid, sid = opened.request["requestId"], opened.request["sessionId"]
    assert hitl("answer", rid, "approve", "--as", "root") == (
        0, f"approved {rid} as root; the agent that asked it, elsewhere, hears it (its long-poll, its callback)\n")

    code, out = hitl("show", sid)

    lines = [line.strip() for line in out.splitlines()]
    assert code == 0 and "requests of agents elsewhere (no turn)" in lines
    assert f"request {rid} tool-approval: Approve refund_charge?  [approved by root (operator)]" in lines
    assert "response from root (operator): approve -> allowed" in lines


def test_show_json_is_the_history_document(hitl: Hitl, app: Stack) -> None:
    sid, _ = app.start(REFUND)

    code, out = hitl("show", sid, "--json")

    assert code == 0
    assert json.loads(out) == app.history(sid)
    assert hitl("show", "ses_nope") == (1, "hitl: no session 'ses_nope'")


def test_show_prints_the_latest_turns_and_how_to_read_earlier_ones(hitl: Hitl, app: Stack,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    sid = open_session(app.rt, api_key_principal("alice")).session_id
    ids = add_turns(app.rt.db, sid, HISTORY_TURNS + 1, api_key_principal("alice"))

    def shown(*argv: str) -> tuple[list[str], str]:
        main(["show", sid, *argv])
        printed = capsys.readouterr()
        return [line.split()[2] for line in printed.out.splitlines() if line.startswith("turn ")], printed.err

    assert shown() == (ids[1:], f"earlier turns: add --before {ids[1]}\n")
    assert shown("--before", ids[1]) == (ids[:1], "")
    assert hitl("show", sid, "--before", "turn_nope") == (1, "hitl: `before` names no turn of this session")


def test_answer_text_answers_a_question(hitl: Hitl, app: Stack) -> None:
    sid, _ = app.start(QUESTION)
    [question] = app.pending(sid)

    code, out = hitl("answer", question["requestId"], "--text", "the cheapest", "--as", "ops", "--json")

    assert code == 0
    assert json.loads(out)["request"]["response"] == {"optionId": None, "text": "the cheapest"}
    app.wait_idle()
    assert '{"status": "answered", "answer": "the cheapest"}' in app.turn(sid)["result"]


def test_resume_a_waiting_turn_whose_requests_closed_but_never_resumed(hitl: Hitl, app: Stack) -> None:
    sid, turn_id = app.start(REFUND)
    [request] = app.pending(sid)
    with app.rt.transaction() as db:  # approved by a process that died before it resumed the turn
        close_request(app.rt, db, request["requestId"], outcome="approved",
                      response={"optionId": "approve", "text": None}, responder=api_key_principal("alice"))
    assert app.turn(sid)["status"] == "waiting"

    assert hitl("resume", turn_id) == (0, f"turn {turn_id} resumed\n")
    app.wait_idle()  # in the serving process, which took it before the command returned
    assert [call["charge_id"] for call in ran("refund")] == ["ch_1"]
    turn = app.turn(sid)
    assert turn["status"] == "completed"
    assert [run["status"] for run in turn["runs"]] == ["interrupted", "succeeded"]


def test_resume_a_queued_turn_whose_job_was_lost(hitl: Hitl, app: Stack) -> None:
    executor, app.rt.executor = app.rt.executor, LostJobs()
    opened = open_session(app.rt, api_key_principal("alice"), message=LOOKUP)
    app.rt.executor = executor
    assert opened.turn_id is not None
    assert app.turn(opened.session_id)["status"] == "queued"

    assert hitl("resume", opened.turn_id) == (0, f"turn {opened.turn_id} requeued\n")
    app.wait_idle()

    assert len(ran("lookup")) == 1
    assert app.turn(opened.session_id)["status"] == "completed"


def test_resume_refuses_turns_it_cannot_help(hitl: Hitl, app: Stack) -> None:
    done_sid, done_turn = app.start(LOOKUP)
    waiting_sid, waiting_turn = app.start(REFUND)
    behind = app.client("bob:operator").post(f"/api/sessions/{waiting_sid}/input", json={"message": LOOKUP})
    assert behind.get_json()["effect"] == "queued"  # someone else's message waits for alice's turn to end
    queued_turn = behind.get_json()["turnId"]

    assert hitl("resume", done_turn) == (
        1, f"hitl: turn {done_turn} is completed: only a waiting or queued turn can be resumed")
    code, message = hitl("resume", waiting_turn)
    assert code == 1 and f"turn {waiting_turn} is waiting on 1 open request(s)" in message
    code, message = hitl("resume", queued_turn)
    assert code == 1 and f"waits for turn {waiting_turn} (waiting)" in message
    assert hitl("resume", "turn_nope") == (1, "hitl: no turn 'turn_nope'")
    assert ran("lookup") == [ran("lookup")[0]]  # only the first session's lookup ever ran
    assert app.turn(waiting_sid, 2)["status"] == "queued"
