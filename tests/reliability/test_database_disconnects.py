"""PostgreSQL backends terminated (`pg_terminate_backend`, every connection to the suite's database, over and over)
while 30 answers arrive through the REST API, Slack and GitHub: no answer is lost.

Clients do what platforms do: a request that got a 5xx, or whose connection dropped, is sent again (Slack and
GitHub redeliver the same delivery, with the same platform id). The web side and the worker reconnect on their
own; what a dead connection cut short is recovered by the sweep.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import psycopg
import pytest
import requests

from engine.answers.submit import submit_responses
from engine.jobs.recovery import sweep
from engine.protocol import InputResponse, operator_principal
from tests.conftest import API_KEYS
from tests.github.support import ALICE as GITHUB_ALICE
from tests.github.support import BOT, Github
from tests.reliability.conftest import Deployment
from tests.reliability.deliveries import github_comment, redelivered, slack_click
from tests.slack.workspace import Workspace
from tests.support.agent import read_ledger, script
from tests.support.fake_slack import BOT_USER
from tests.support.live_server import live_server
from tests.support.services import conninfo

PER_WAY = 10
REFUND = script([("refund", {"charge_id": "ch_db", "amount": 1})], final="refunded")
FRESH = "may have partly run"
TERMINATE = """SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
               WHERE datname = current_database() AND pid <> pg_backend_pid()"""


@contextmanager
def terminating(url: str, every: float = 0.1) -> Iterator[list[int]]:
    """While the block runs, terminate every other connection to the database of `url`, every `every` seconds;
    yields the running count of connections terminated."""
    killed, stop = [0], threading.Event()

    def loop() -> None:
        with psycopg.connect(conninfo(url), autocommit=True) as conn:
            while not stop.wait(every):
                row = conn.execute(TERMINATE).fetchone()
                killed[0] += row[0] if row else 0

    thread = threading.Thread(target=loop, name="pg-terminator", daemon=True)
    thread.start()
    try:
        yield killed
    finally:
        stop.set()
        thread.join()


@pytest.mark.slow
def test_answers_arriving_while_database_connections_are_terminated_are_all_applied(deployed: Deployment) -> None:
    stack = deployed.stack
    slack, github = Workspace(stack, deployed.slack), Github(stack, deployed.github.fake)
    api = stack.client("alice")
    key = next(k for k, v in API_KEYS.items() if v == "alice")
    by_api = [api.post("/api/sessions", json={"message": REFUND}).get_json()["id"] for _ in range(PER_WAY)]
    mentions = [slack.event("app_mention", "alice", f"<@{BOT_USER}> {REFUND}") for _ in range(PER_WAY)]
    for mention in mentions:
        assert slack.send_event(mention).status_code == 200
    issues = list(range(100, 100 + PER_WAY))
    for issue in issues:
        github.comment(GITHUB_ALICE, f"@{BOT} {REFUND}", issue=issue, wait=False)
    stack.wait_idle()
    sessions = by_api + [slack.session_of(m["event"]) for m in mentions] + [github.session(i) for i in issues]
    requests_ = [stack.pending(sid)[0]["requestId"] for sid in sessions]
    clicks = [slack_click(slack, "alice", slack.cards(m["event"])[-1], "Approve") for m in mentions]
    comments = [github_comment(github, GITHUB_ALICE, "/approve", issue) for issue in issues]

    with live_server(stack.app) as url, terminating(deployed.url) as killed:
        def by_patch(request_id: str) -> Callable[[], requests.Response]:
            return lambda: requests.patch(f"{url}/api/requests/{request_id}", json={"optionId": "approve"},
                                          headers={"Authorization": f"Bearer {key}"}, timeout=60)

        sends = [by_patch(rid) for rid in requests_[:PER_WAY]]
        sends += [lambda d=delivery: d.send(url) for delivery in [*clicks, *comments]]
        with ThreadPoolExecutor(max_workers=6) as pool:
            statuses = list(pool.map(redelivered, sends))
        assert killed[0] > 0

    # a 409 is a retried PATCH whose first attempt settled the request before its answer was lost
    assert all(status < 300 or status == 409 for status in statuses), statuses
    # what a job could not finish waits for the sweep: stop the worker (it finishes its job), let the leases and
    # the outbox's wait run out, sweep, and start a worker again
    deployed.workers[-1].kill(15)
    stack.rt.db.engine.dispose()  # this process's pooled connections were terminated too (a sweep would fail once)
    deployed.later(120)
    sweep(stack.rt)
    deployed.start_worker()
    stack.wait_idle()

    # no answer is lost; a call whose result was lost with its connection asks for a fresh approval (rule 12)
    for sid, request_id in zip(sessions, requests_, strict=True):
        turn = stack.turn(sid)
        assert [r["outcome"] for r in turn["requests"] if r["requestId"] == request_id] == ["approved"]
        assert turn["status"] == "completed" or [FRESH in p["prompt"] for p in stack.pending(sid)] == [True]
    for fresh in [p for sid in sessions for p in stack.pending(sid)]:
        submit_responses(stack.rt, operator_principal("ops"), [InputResponse(request_id=fresh["requestId"],
                                                                         option_id="approve")])
    stack.wait_idle()
    for sid in sessions:
        turn = stack.turn(sid)
        calls = {c["callId"] for c in turn["toolCalls"]}
        runs = [e for e in read_ledger() if e["tool"] == "refund" and e["callId"] in calls]
        assert turn["status"] == "completed"
        assert 1 <= len(runs) <= len([r for r in turn["requests"] if r["outcome"] == "approved"])
