"""`POST /github/webhook`: what people's comments do, and what they never do (GitHub mocked with `responses`)."""

from __future__ import annotations

import json
from pathlib import Path

from engine.jobs.recovery import sweep
from tests.github.conftest import github_in_process
from tests.github.support import (
    ALICE,
    BOB,
    BOT,
    BOT_USER,
    CAROL,
    HOOK_ID,
    REPO,
    SECRET,
    Github,
    Person,
    comment_event,
    fixture,
)
from tests.support.agent import read_ledger, script
from tests.support.signing import github_signature

REFUND = ("refund", {"charge_id": "ch_1", "amount": 5})
QUESTION = ("ask_question", {"question": "Which color?", "options": [
    {"label": "Red", "description": "warm"}, {"label": "Blue", "description": "cool"}]})


def start(github: Github, *steps: tuple[str, dict], issue: int = 1, who: Person = ALICE) -> str:
    """`who` mentions the bot with a script: the session of the issue starts and parks."""
    assert github.comment(who, f"@{BOT} {script(list(steps))}", issue).outcome == "accepted"
    return github.session(issue)


def pending(github: Github, session_id: str) -> list[dict]:
    return github.stack.pending(session_id)


def refunds() -> list[dict]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def test_a_forged_delivery_is_refused_before_it_is_read_and_changes_nothing(github: Github) -> None:
    body = json.dumps(comment_event(f"@{BOT} {script([REFUND])}", ALICE, 500)).encode()
    forged = [github.deliver(body, signature=github_signature("not our secret", body)),
              github.deliver(body, signature="sha256=" + "0" * 64),
              github.deliver(body.replace(b"ch_1", b"ch_9"), signature=github_signature(SECRET, body)),
              github.deliver(b"{not even json", signature="sha256=00")]
    assert [r.status_code for r in forged] == [401, 401, 401, 401]
    github.wait_idle()
    assert github.inbound() == [] and github.fake.calls == [] and github.session() == ""


def test_ping_is_answered_and_a_delivery_is_its_hook_and_delivery_id(github: Github) -> None:
    ping = fixture("ping")
    first = github.deliver(ping, event="ping", delivery="same-id")
    other_hook = github.deliver(ping, event="ping", delivery="same-id", hook=HOOK_ID + 1)
    again = github.deliver(ping, event="ping", delivery="same-id")
    assert [(r.status_code, r.get_json()["status"]) for r in (first, other_hook, again)] == [
        (200, "pong"), (200, "pong"), (200, "duplicate")]


def test_a_signed_delivery_we_cannot_read_is_a_400_without_effect(github: Github) -> None:
    assert github.deliver(b"{not json").status_code == 400
    no_delivery_id = github.stack.client(None).post("/github/webhook", data=b"{}", headers={
        "X-GitHub-Event": "ping", "X-GitHub-Hook-ID": "1", "X-Hub-Signature-256": github_signature(SECRET, b"{}")})
    assert no_delivery_id.status_code == 400
    assert github.inbound() == []


def test_replayed_and_duplicated_deliveries_change_nothing(github: Github) -> None:
    mention = github.fake.add_comment(REPO, 1, "alice", f"@{BOT} {script([REFUND])}")
    opening = comment_event(mention.body, ALICE, mention.id)
    assert github.deliver(opening, delivery="d-1").get_json()["status"] == "accepted"
    github.wait_idle()
    approval = github.fake.add_comment(REPO, 1, "alice", "/approve")
    approve = comment_event("/approve", ALICE, approval.id)
    assert github.deliver(approve, delivery="d-2").get_json()["status"] == "accepted"
    github.wait_idle()
    replays = [github.deliver(opening, delivery="d-1"), github.deliver(opening, delivery="d-3"),
               github.deliver(approve, delivery="d-2"), github.deliver(approve, delivery="d-4", hook=HOOK_ID + 1)]
    github.wait_idle()
    assert [r.get_json()["status"] for r in replays] == ["duplicate"] * 4
    assert len(github.stack.history(github.session())["turns"]) == 1
    assert len(refunds()) == 1
    assert (mention.reactions, approval.reactions) == (["eyes"], ["eyes", "+1"])
    assert [row.duplicates for row in github.inbound()] == [2, 2]  # one row per comment, repeats counted


def test_edited_and_deleted_comments_are_ignored(github: Github) -> None:
    sid = start(github, REFUND)
    edited = github.comment(ALICE, "/approve", action="edited", template="issue_comment_edited")
    deleted = github.comment(ALICE, "/approve", action="deleted", template="issue_comment_deleted")
    assert (edited.outcome, deleted.outcome) == ("ignored", "ignored")
    assert len(pending(github, sid)) == 1 and edited.comment.reactions == deleted.comment.reactions == []


def test_the_bots_own_prompt_read_back_never_answers_anything(github: Github) -> None:
    sid = start(github, QUESTION)  # a question takes free text: any comment read as an answer would settle it
    [(_, prompt)] = github.prompts()
    read_back = [github.comment(BOT_USER, prompt.body), github.comment(BOT_USER, "/answer Blue"),
                 github.comment(BOT_USER, f"@{BOT} Blue"),
                 github.comment(Person("hitl-bot[bot]", 9002, "Bot"), "/answer Blue"),
                 github.comment(ALICE, "/answer Blue", app=BOT)]
    assert [s.outcome for s in read_back] == ["ignored"] * 5
    assert len(pending(github, sid)) == 1
    assert all(s.comment.reactions == [] for s in read_back)


def test_quoted_lines_are_someone_elses_words(github: Github) -> None:
    sid = start(github, REFUND)
    assert github.comment(ALICE, "> /approve\nNot yet, I am checking the charge").outcome == "ignored"
    assert len(pending(github, sid)) == 1
    github.comment(ALICE, "> Approve refund?\n\n/approve")
    assert pending(github, sid) == [] and len(refunds()) == 1


def test_approve_runs_it_and_the_prompt_names_who_approved(github: Github) -> None:
    sid = start(github, REFUND)
    [(_, prompt)] = github.prompts()
    assert "Reply `/approve` or `/deny <note>`." in prompt.body and "charge_id=ch_1, amount=5" in prompt.body
    approval = github.comment(ALICE, "/approve")
    assert approval.comment.reactions == ["eyes", "+1"]
    assert "Reply `/approve`" not in prompt.body and "**Approved by alice.**" in prompt.body
    assert [r["charge_id"] for r in refunds()] == ["ch_1"]
    assert github.stack.turn(sid)["status"] == "completed"
    assert github.said()[-1].startswith("done | ")


def test_deny_with_a_note_never_runs_it(github: Github) -> None:
    sid = start(github, REFUND)
    github.comment(ALICE, "/deny too expensive")
    [(request, prompt)] = github.prompts()
    assert (request.outcome, request.response) == ("denied", {"optionId": "deny", "text": "too expensive"})
    assert "**Denied by alice: too expensive**" in prompt.body
    assert refunds() == [] and github.stack.turn(sid)["status"] == "completed"


def test_a_question_is_answered_by_number_label_or_own_words(github: Github) -> None:
    replies = {"/answer 2": {"optionId": "Blue", "text": None}, "/answer Blue": {"optionId": "Blue", "text": None},
               "/answer something teal": {"optionId": None, "text": "something teal"},
               f"@{BOT} something teal": {"optionId": None, "text": "something teal"}}
    for issue, (reply, response) in enumerate(replies.items(), start=1):
        start(github, QUESTION, issue=issue)
        [(_, prompt)] = github.prompts(issue)
        assert "1. Red - warm\n2. Blue - cool\n" in prompt.body
        assert "Reply `/answer <n>` or `/answer <your own words>`." in prompt.body
        answer = github.comment(ALICE, reply, issue)
        [(request, prompt)] = github.prompts(issue)
        assert (request.outcome, request.response) == ("answered", response), reply
        assert answer.comment.reactions == ["eyes", "+1"]
        assert "Answered:" in prompt.body and "(by alice)" in prompt.body


def test_a_refused_user_gets_a_thumbs_down_and_a_reply_with_the_reason(github: Github) -> None:
    sid = start(github, REFUND)
    refused = github.comment(BOB, "/approve")
    assert refused.comment.reactions == ["eyes", "-1"]
    assert github.said()[-1] == ("@bob your answer to “Approve refund?” was not accepted: "
                                 "only alice may answer this request")
    [(request, prompt)] = github.prompts()
    assert request.status == "pending" and "Reply `/approve`" in prompt.body and refunds() == []
    github.comment(ALICE, "/approve")
    assert github.stack.turn(sid)["status"] == "completed" and len(refunds()) == 1


def test_one_request_at_a_time_in_order_with_its_place_in_the_queue(github: Github) -> None:
    start(github, REFUND, ("refund", {"charge_id": "ch_2", "amount": 6}))
    [(first, prompt)] = github.prompts()
    assert prompt.body.startswith("(1 of 2) Approve refund?\ncharge_id=ch_1")
    github.comment(ALICE, "/deny")
    shown = github.prompts()
    assert [r.request_id for r, _ in shown][0] == first.request_id and len(shown) == 2
    assert shown[1][1].body.startswith("Approve refund?\ncharge_id=ch_2")
    github.comment(ALICE, "/approve")
    assert [r["charge_id"] for r in refunds()] == ["ch_2"]


def test_a_reply_written_before_the_next_prompt_never_answers_it(github: Github) -> None:
    """GitHub may deliver late: a `/deny` written while the first prompt was shown is about that prompt."""
    sid = start(github, REFUND, ("refund", {"charge_id": "ch_2", "amount": 6}))
    written_early = github.fake.next_id()
    github.comment(ALICE, "/approve")  # settles the first; the second is posted after it
    late = github.comment(ALICE, "/deny", comment_id=written_early)
    assert [(r.status, r.outcome) for r, _ in github.prompts()] == [("resolved", "approved"), ("pending", None)]
    assert late.outcome == "accepted" and len(pending(github, sid)) == 1


def test_a_command_that_answers_nothing_is_ignored(github: Github) -> None:
    assert github.comment(ALICE, "/approve").outcome == "ignored"  # nothing shown on this issue
    question = start(github, QUESTION)
    assert [github.comment(ALICE, reply).outcome for reply in ("/approve", "/deny")] == ["ignored"] * 2
    approval = start(github, REFUND, issue=2)
    assert github.comment(ALICE, "/answer 3", issue=2).outcome == "ignored"  # it has two options, no free text
    assert len(pending(github, question)) == len(pending(github, approval)) == 1


def test_permission_comes_from_the_collaborators_api_not_author_association(tmp_path: Path) -> None:
    with github_in_process(tmp_path, github_min_permission="triage") as github:
        permission_from_the_collaborators_api(github)


def permission_from_the_collaborators_api(github: Github) -> None:
    github.fake.roles["carol"] = "triage"
    start(github, QUESTION, who=CAROL)  # GitHub's example says author_association OWNER: never used
    github.comment(CAROL, "/answer 1")
    [(request, _)] = github.prompts()
    assert request.responder is not None and request.responder.wire() == {
        "authenticator": "github", "issuer": "github:Codertocat", "principalType": "user",
        "principalId": "github:1003", "attributes": {"login": "carol", "repository": REPO, "permission": "triage"}}
    lookups = [c for c in github.fake.calls if c[0] == "GET"]
    assert lookups == [("GET", "/repos/Codertocat/Hello-World/collaborators/carol/permission")]  # then cached


def test_a_renamed_user_is_the_same_person(github: Github) -> None:
    sid = start(github, REFUND)
    github.comment(Person("alice-renamed", ALICE.id), "/approve")
    assert github.stack.turn(sid)["status"] == "completed"
    assert "**Approved by alice-renamed.**" in github.prompts()[0][1].body


def test_github_down_the_webhook_still_answers_and_nothing_is_lost(tmp_path: Path) -> None:
    """With GITHUB_MIN_PERMISSION=none the permission only informs response policies (the default fails closed:
    test_access.py)."""
    with github_in_process(tmp_path, github_min_permission="none") as github:
        nothing_lost_while_github_is_down(github)


def nothing_lost_while_github_is_down(github: Github) -> None:
    github.fake.down = True
    opening = github.comment(ALICE, f"@{BOT} {script([REFUND])}")
    assert opening.response.status_code == 202  # stored and queued without GitHub
    sid = github.session()
    assert len(pending(github, sid)) == 1 and github.said() == []
    principal = github.inbound()[0].principal or {}
    assert principal["attributes"]["permission"] is None
    github.fake.down = False
    sweep(github.stack.rt)
    github.wait_idle()
    [(_, prompt)] = github.prompts()
    assert "Approve refund?" in prompt.body
    sweep(github.stack.rt)
    github.wait_idle()
    assert len(github.prompts()) == 1
