"""Reminders, escalation and timeout outcomes over SMS, end to end: PostgreSQL, Redis and real `hitl worker`
processes, each sweeping every second, texting through the fake Twilio API."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from adapters.twilio.render import render_confirmation, render_reminder_sms, segments
from engine.channels.delivery import place_title
from engine.protocol import TIMEOUT_PRINCIPAL
from engine.store.queries import title_of
from engine.store.tables import Session
from tests.conftest import WorkerProcess, more_workers
from tests.support.agent import read_ledger, script, wait_for
from tests.twilio.support import ALICE, BOB, Sms, _shared, twilio_stack
from tests.twilio.test_render import request

PROMPT = "Approve nudged refund?\namount=5\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."
REMINDER = "Reminder: Approve nudged refund? Reply 1 or 2 (or approve / deny)."


def reminders(sms: Sms, number: str) -> list[str]:
    return [body for body in sms.inbox(number) if body.startswith("Reminder:")]


def delivered(sms: Sms, number: str) -> bool:
    """Whether the number's session has every event delivered and no deliverer holds it."""
    with sms.stack.rt.db.read() as db:
        session = db.get_one(Session, sms.session_at(number))
        return session.delivery_lease_until is None and not session.delivery_queued


def test_each_reminder_is_texted_once_by_four_workers_and_across_a_restart(request: pytest.FixtureRequest,
                                                                           tmp_path: Path) -> None:
    """Every second, twice at most: four workers sweep when the first falls due; then every worker dies (SIGKILL)
    and a new one starts before the second: it comes, once."""
    with twilio_stack(request, "postgres", tmp_path) as sms, more_workers(_shared["worker"][1], 3, tmp_path) as more:
        sms.text(ALICE, script([("nudged_refund", {"amount": 5})], final="refunded"))
        assert sms.inbox(ALICE)[-1] == PROMPT
        wait_for(lambda: reminders(sms, ALICE), timeout=15, what="the first reminder")
        # (a worker killed while it still held the delivery's lease would hold the next reminder back a minute)
        wait_for(lambda: delivered(sms, ALICE), timeout=15, what="the first reminder's delivery to end")

        queue, shared = _shared["worker"]
        for worker in [*more, shared]:
            worker.kill(9)
        assert reminders(sms, ALICE) == [REMINDER]  # none was due again yet
        fresh = WorkerProcess(shared.env, tmp_path / "restarted.log")
        _shared["worker"] = (queue, fresh)  # the Twilio worker of the tests after this one
        fresh.wait_ready()

        wait_for(lambda: len(reminders(sms, ALICE)) == 2, timeout=15, what="the second reminder")
        time.sleep(2.5)  # (a third would be due by now)
        assert reminders(sms, ALICE) == [REMINDER, REMINDER]
        assert sms.inbox(ALICE)[-2:] == [REMINDER, REMINDER]  # nothing else was texted in between
        [pending] = sms.stack.pending(sms.session_at(ALICE))
        assert pending["reminded"] == 2

        sms.text(ALICE, "1")
        assert [e["responder"] for e in read_ledger() if e["tool"] == "nudged_refund"] == [f"twilio:{ALICE}"]


def test_an_escalation_texts_a_second_phone_whose_owner_then_approves(request: pytest.FixtureRequest,
                                                                      tmp_path: Path) -> None:
    with twilio_stack(request, "postgres", tmp_path) as sms:
        message = script([("escalated_refund", {"amount": 40})], final="refunded")
        sms.text(ALICE, message)
        prompt = "Approve escalated refund?\namount=40\n1. Approve\n2. Deny\nReply 1 or 2 (or approve / deny)."
        assert sms.inbox(ALICE)[-1] == prompt
        wait_for(lambda: sms.inbox(BOB), timeout=15, what="the escalation to bob's phone")
        sms.wait()
        about = place_title(title_of(message))  # bob's phone names the session it comes from
        assert about is not None and about.endswith("...")
        assert sms.inbox(BOB) == [prompt.replace("refund?", f"refund? ({about})", 1)]
        [escalated] = [e["data"] for e in sms.stack.events(sms.session_at(ALICE)) if e["type"] == "input.escalated"]
        assert escalated["approvers"] == [f"twilio:{BOB}", "bob"] and escalated["to"][0]["channel"] == "twilio"

        sms.text(BOB, "1")
        [ran] = read_ledger()
        assert (ran["tool"], ran["responder"]) == ("escalated_refund", f"twilio:{BOB}")
        told = sms.inbox(BOB)[-1]  # (a confirmation's prompt is cut to fit)
        assert told.startswith("Approve escalated refund? (") and told.endswith(" Approved by bob.")
        assert "Approve escalated refund? Approved by bob." in sms.inbox(ALICE)
        assert sms.inbox(ALICE)[-1].startswith("refunded")
        assert sms.stack.turn(sms.session_at(ALICE))["status"] == "completed"


def test_approved_on_timeout_is_texted_as_such_and_the_tool_runs(request: pytest.FixtureRequest,
                                                                 tmp_path: Path) -> None:
    with twilio_stack(request, "postgres", tmp_path) as sms:
        sms.text(ALICE, script([("lenient_refund", {"amount": 7})], final="refunded"))
        wait_for(lambda: read_ledger(), timeout=15, what="the approval on timeout")
        sms.wait()
        [ran] = read_ledger()
        assert (ran["tool"], ran["responder"], ran["note"]) == ("lenient_refund", "app", "approved on timeout")
        confirmation, final = sms.inbox(ALICE)[-2:]
        assert confirmation == "Approve lenient refund? Approved on timeout."
        assert final.startswith("refunded") and '"approval": "approved on timeout"' in final


def test_a_reminder_is_one_segment_and_a_timeout_approval_names_no_person() -> None:
    long = request(prompt="Approve the refund of the order that arrived broken, with the receipt attached? " * 4)
    text = render_reminder_sms(long)
    assert text.startswith("Reminder: Approve the refund") and text.endswith("Reply 1 or 2 (or approve / deny).")
    assert segments(text) == 1
    timed_out = request(status="resolved", outcome="approved", responder=TIMEOUT_PRINCIPAL.wire())
    assert render_confirmation(timed_out) == "Approve refund? Approved on timeout."
