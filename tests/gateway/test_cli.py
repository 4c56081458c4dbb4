"""The `hitl` command, run in-process through `gateway.cli.main` (and, for a few cases, as a real process)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine, inspect, select, text, update
from sqlalchemy.engine import make_url

from engine import defaults
from engine.jobs.outbox import ExecutorUnavailable
from engine.jobs.runtime import Runtime
from engine.store.db import Database
from engine.store.tables import Base, Outbox, Turn, utcnow
from engine.turns.sessions import open_session
from tests.conftest import ROOT, Stack, sqlite_settings
from tests.support.agent import agent as test_agent
from tests.support.agent import read_ledger, script
from tests.support.cli import migrated, run_hitl
from tests.support.services import require_postgres

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])
OPERATOR_OPS = {"authenticator": "operator", "issuer": "hitl", "principalType": "user", "principalId": "ops",
                "attributes": {}}


def refunds() -> list[dict[str, Any]]:
    return [e for e in read_ledger() if e["tool"] == "refund"]


def table_names(url: str, schema: str | None = None) -> set[str]:
    engine = create_engine(url)
    try:
        return set(inspect(engine).get_table_names(schema=schema))
    finally:
        engine.dispose()


# -- db upgrade ---------------------------------------------------------------------------------------


def test_db_upgrade_creates_the_tables(hitl: Any, env: Path) -> None:
    assert not env.exists()

    done = hitl("db", "upgrade")

    assert done.code == 0, done.message
    assert "latest revision" in done.out
    assert set(Base.metadata.tables) | {"alembic_version"} <= table_names(os.environ["DATABASE_URL"])
    assert hitl("db", "upgrade").code == 0  # a second run is a no-op


def test_db_upgrade_as_a_process_on_sqlite(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"

    done = run_hitl("db", "upgrade", DATABASE_URL=url)

    assert done.returncode == 0, done.stderr
    assert "latest revision" in done.stdout
    assert set(Base.metadata.tables) | {"alembic_version"} <= table_names(url)


@pytest.fixture
def empty_postgres() -> Iterator[tuple[str, str]]:
    """A URL whose connections live in an empty throwaway schema of the test PostgreSQL, and the schema."""
    base = make_url(require_postgres())
    schema = f"test_cli_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    try:
        yield base.update_query_dict({"options": f"-csearch_path={schema}"}).render_as_string(
            hide_password=False), schema
    finally:
        with admin.begin() as conn:
            conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
        admin.dispose()


def test_db_upgrade_as_a_process_on_postgres(empty_postgres: tuple[str, str]) -> None:
    url, schema = empty_postgres

    done = run_hitl("db", "upgrade", DATABASE_URL=url)

    assert done.returncode == 0, done.stderr
    assert set(Base.metadata.tables) | {"alembic_version"} <= table_names(url, schema)


def newer_version_migrated(url: str) -> None:
    """As before a rollback: the database holds a migration of a newer version, which this code does not know."""
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.execute(text("UPDATE alembic_version SET version_num = '9999_from_a_newer_version'"))
    engine.dispose()


def test_db_upgrade_leaves_a_database_a_newer_version_migrated(empty_postgres: tuple[str, str],
                                                               tmp_path: Path) -> None:
    """A rollback runs the release command of the older version: it must not fail (a failed release phase
    stops the rollback), and it changes nothing. SQLite, upgraded on start, starts likewise."""
    sqlite = f"sqlite:///{tmp_path / 'hitl.db'}"
    for url in (empty_postgres[0], sqlite):
        assert run_hitl("db", "upgrade", DATABASE_URL=url).returncode == 0
        newer_version_migrated(url)

        done = run_hitl("db", "upgrade", DATABASE_URL=url)

        assert done.returncode == 0, done.stderr
        assert "9999_from_a_newer_version" in done.stdout and "Traceback" not in done.stderr
        with create_engine(url).connect() as conn:
            assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == \
                "9999_from_a_newer_version"
        done = run_hitl("requests", DATABASE_URL=url, REDIS_URL="")
        assert done.returncode == 0, done.stderr


def test_an_unmigrated_postgres_database_stops_the_gateway_naming_db_upgrade(empty_postgres: tuple[str, str]) -> None:
    """PostgreSQL is migrated as a release step (SQLite, embedded, on start): a process started before it
    says what to run, where it used to start and fail each request on a missing table."""
    url, schema = empty_postgres

    for argv in (["requests"], ["worker"]):
        done = run_hitl(*argv, DATABASE_URL=url, REDIS_URL="redis://127.0.0.1:1/0")
        assert done.returncode != 0, argv
        assert "run `hitl db upgrade` first" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert table_names(url, schema) == set()  # nothing created behind the operator's back

    assert run_hitl("db", "upgrade", DATABASE_URL=url).returncode == 0
    done = run_hitl("requests", DATABASE_URL=url, REDIS_URL="")
    assert done.returncode == 0, done.stderr


# -- requests -----------------------------------------------------------------------------------------


def test_requests_lists_the_inbox(hitl: Any, embedded: Stack) -> None:
    open_sid, _ = embedded.start(REFUND)
    [pending] = embedded.pending(open_sid)
    closed_sid, _ = embedded.start(script([("refund", {"charge_id": "ch_2", "amount": 1})]))
    [closed] = embedded.pending(closed_sid)
    embedded.answer(closed["requestId"], "cancel")

    table = hitl("requests")
    assert table.code == 0
    header, *rows = table.out.splitlines()
    assert header.split()[:3] == ["REQUEST", "KIND", "STATUS"]
    assert [row.split()[:3] for row in rows] == [
        [pending["requestId"], "tool-approval", "pending"], [closed["requestId"], "tool-approval", "resolved"]]
    assert rows[0].endswith("Approve refund?")
    assert rows[1].split()[3] == "denied"

    only_pending = hitl("requests", "--status", "pending").out
    assert pending["requestId"] in only_pending and closed["requestId"] not in only_pending
    only_resolved = hitl("requests", "--status", "resolved").out
    assert closed["requestId"] in only_resolved and pending["requestId"] not in only_resolved
    one_session = hitl("requests", "--session", closed_sid).out
    assert closed["requestId"] in one_session and pending["requestId"] not in one_session

    page = hitl("requests", "--status", "pending", "--json").json()
    assert page["next"] is None
    listed = page["requests"]
    assert [r["requestId"] for r in listed] == [pending["requestId"]]
    assert listed[0]["sessionId"] == open_sid
    assert listed[0]["action"]["input"] == {"charge_id": "ch_1", "amount": 20}
    assert listed[0]["requestedBy"]["principalId"] == "alice"
    assert hitl("requests", "--session", "ses_nope", "--json").json() == {"requests": [], "next": None}

    assert hitl("requests", "--status", "bogus").code != 0

    first = hitl("requests", "--limit", "1")  # a page, as the API answers it
    assert [row.split()[0] for row in first.out.splitlines()[1:]] == [pending["requestId"]]
    assert first.err.strip() == f"more: add --after {pending['requestId']}"
    rest = hitl("requests", "--limit", "1", "--after", pending["requestId"])
    assert [row.split()[0] for row in rest.out.splitlines()[1:]] == [closed["requestId"]] and rest.err == ""
    assert "`after` names no input request" in hitl("requests", "--after", "req_nope").message


# -- answer -------------------------------------------------------------------------------------------


def test_answer_approve_settles_as_the_operator_and_the_turn_completes(hitl: Any, embedded: Stack) -> None:
    sid, turn_id = embedded.start(REFUND)
    [request] = embedded.pending(sid)

    done = hitl("answer", request["requestId"], "approve", "--as", "ops")

    assert (done.code, done.out) == (0, f"approved {request['requestId']} as ops; turn {turn_id} resumes\n")
    embedded.wait_idle()  # the serving process took the turn before the command returned; it runs it there
    turn = embedded.turn(sid)
    assert turn["status"] == "completed"
    assert [r["status"] for r in turn["runs"]] == ["interrupted", "succeeded"]
    [refund] = refunds()
    assert (refund["requester"], refund["responder"]) == ("alice", "ops")
    [candidate] = turn["requests"][0]["candidates"]
    assert (candidate["responder"], candidate["outcome"]) == (OPERATOR_OPS, "allowed")


def test_answer_deny_with_a_note(hitl: Any, embedded: Stack) -> None:
    sid, _ = embedded.start(REFUND)
    [request] = embedded.pending(sid)

    done = hitl("answer", request["requestId"], "deny", "--note", "no", "--as", "ops", "--json")

    assert done.code == 0, done.message
    result = done.json()  # the API's document
    assert (result["requestId"], result["status"]) == (request["requestId"], "settled")
    assert result["request"]["outcome"] == "denied"
    assert result["request"]["response"] == {"optionId": "deny", "text": "no"}
    assert result["request"]["responder"] == OPERATOR_OPS
    embedded.wait_idle()
    turn = embedded.turn(sid)
    assert turn["status"] == "completed"
    assert "Denied by ops: no" in turn["result"]
    assert refunds() == []


def test_answering_a_closed_request_fails_and_changes_nothing(hitl: Any, embedded: Stack) -> None:
    sid, _ = embedded.start(REFUND)
    [request] = embedded.pending(sid)
    assert hitl("answer", request["requestId"], "approve", "--as", "ops").code == 0
    embedded.wait_idle()
    events = len(embedded.events(sid))

    again = hitl("answer", request["requestId"], "cancel", "--as", "ops")

    assert again.code != 0
    assert "no longer open" in again.message
    assert request["requestId"] in again.message
    assert len(embedded.events(sid)) == events
    assert len(refunds()) == 1


@pytest.mark.parametrize("argv", [
    pytest.param([], id="neither-choice-nor-text"),
    pytest.param(["approve", "--text", "yes"], id="choice-and-text"),
    pytest.param(["maybe"], id="unknown-option"),
    pytest.param(["approve", "--note", "why not"], id="note-on-approve"),
])
def test_a_bad_answer_fails_and_the_request_stays_open(hitl: Any, embedded: Stack, argv: list[str]) -> None:
    sid, _ = embedded.start(REFUND)
    [request] = embedded.pending(sid)
    events = len(embedded.events(sid))

    done = hitl("answer", request["requestId"], *argv, "--as", "ops")

    assert done.code != 0
    assert done.message.startswith("hitl: ")
    assert [r["requestId"] for r in embedded.pending(sid)] == [request["requestId"]]
    assert len(embedded.events(sid)) == events
    assert refunds() == []


def test_answering_an_unknown_request_fails(hitl: Any, env: Path) -> None:
    migrated(env)
    done = hitl("answer", "req_nope", "approve", "--as", "ops")
    assert done.code != 0
    assert "req_nope" in done.message


def test_answer_without_a_name_answers_as_the_local_operator_as_the_console_does(hitl: Any, embedded: Stack) -> None:
    sid, turn_id = embedded.start(REFUND)
    [request] = embedded.pending(sid)
    for blank in ("", "   "):  # the audit trail would say "approved by" no one
        done = hitl("answer", request["requestId"], "approve", "--as", blank)
        assert done.code != 0 and "--as" in done.err, blank
    assert len(embedded.pending(sid)) == 1

    done = hitl("answer", request["requestId"], "approve")

    assert (done.code, done.out) == (0, f"approved {request['requestId']} as local; turn {turn_id} resumes\n")
    embedded.wait_idle()
    assert embedded.turn(sid)["requests"][0]["responder"] == {**OPERATOR_OPS, "principalId": "local"}


def test_a_refused_operator_answer_exits_non_zero(hitl: Any, embedded: Stack) -> None:
    """The payout tool's own response policy admits only bob, operators included."""
    sid, _ = embedded.start(script([("payout", {"amount": 3})]))
    [request] = embedded.pending(sid)

    done = hitl("answer", request["requestId"], "approve", "--as", "ops", "--json")

    assert done.code != 0
    assert done.message == f"hitl: ops may not answer {request['requestId']}: only bob may approve payouts"
    assert done.json()["status"] == "refused"
    assert done.json()["reason"] == "only bob may approve payouts"
    assert len(embedded.pending(sid)) == 1


# -- sweep --------------------------------------------------------------------------------------------


class LostJobs:
    """An executor whose queue is down: every job stays in the outbox."""

    def submit(self, runtime: Runtime, job: str, args: list[Any], job_id: str, outbox_id: int) -> None:
        raise ExecutorUnavailable("the queue is down")

    def waiting_since(self) -> datetime | None:
        return None  # it cannot tell: the outbox sweep pushes after its interval


def test_sweep_recovers_a_lost_turn_and_prints_a_json_report(hitl: Any, env: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    assert hitl("db", "upgrade").code == 0
    db = Database(os.environ["DATABASE_URL"])
    try:
        lost = Runtime(db, test_agent, LostJobs())
        opened = open_session(lost, None, message=script([("lookup", {"order_id": "o-9"})], final="swept"))
        long_ago = utcnow() - timedelta(minutes=5)
        with db.write() as session:
            session.execute(update(Outbox).values(available_at=long_ago))
            session.execute(update(Turn).values(updated_at=long_ago))
    finally:
        db.dispose()

    monkeypatch.setattr(defaults, "HAND_OVER_POLL_SECONDS", 0.05)
    server = Stack("sqlite", sqlite_settings(tmp_path))  # the serving process the sweep hands the turn over to
    try:
        done = hitl("sweep")

        assert done.code == 0, done.message
        report = done.json()
        # the turn's job is in the outbox: pushed again from its row, not given a second job
        assert (report["requeued"], report["pushed"], report["recovered"], report["resumed"]) == (0, 1, 0, 0)
        assert sum(report.values()) == 1
        server.wait_idle()
    finally:
        server.close()
    assert [e["order_id"] for e in read_ledger() if e["tool"] == "lookup"] == ["o-9"]
    db = Database(os.environ["DATABASE_URL"])
    try:
        with db.read() as session:
            turn = session.get_one(Turn, opened.turn_id)
            assert turn.status == "completed"
            assert turn.result is not None and turn.result.startswith("swept")
            assert session.execute(select(Outbox.id)).first() is None
    finally:
        db.dispose()

    nothing_left = hitl("sweep").json()
    assert {"recovered", "resumed", "requeued", "pushed"} <= set(nothing_left)
    assert set(nothing_left.values()) == {0}


# -- configuration errors -----------------------------------------------------------------------------


def test_worker_without_redis_url_exits_naming_it(hitl: Any, env: Path) -> None:
    done = hitl("worker")
    assert done.code != 0
    assert "REDIS_URL" in done.message


@pytest.mark.parametrize("spec", ["nope:agent", "gateway.demo:nope", "gateway.demo", "gateway.demo:CHARGES"])
def test_a_bad_agent_exits_naming_hitl_agent(hitl: Any, env: Path, monkeypatch: pytest.MonkeyPatch,
                                             spec: str) -> None:
    assert hitl("db", "upgrade").code == 0
    monkeypatch.setenv("HITL_AGENT", spec)
    for argv in (["requests"], ["sweep"], ["answer", "req_x", "approve", "--as", "ops"]):
        done = hitl(*argv)
        assert done.code != 0, argv
        assert "HITL_AGENT" in done.message, argv


@pytest.mark.parametrize(("name", "value", "problem"), [
    ("HITL_SWEEP_SECONDS", "soon", "HITL_SWEEP_SECONDS: Input should be a valid number"),
    ("HITL_WORKER_CLASS", "thread", "HITL_WORKER_CLASS: String should match pattern"),
    ("HITL_RETENTION_DAYS", "0", "HITL_RETENTION_DAYS: Input should be greater than or equal to 1"),
    ("DATABASE_URL", "mysql://db/hitl", "DATABASE_URL: must be a sqlite:/// or postgresql:// URL"),
    ("DATABASE_URL", "postgresql://u:pw@127.0.0.1:notaport/db",
     "DATABASE_URL: is not a URL SQLAlchemy can read (is the port a number?)"),
    ("REDIS_URL", "localhost:6379", "REDIS_URL: must be a redis://, rediss:// or unix:// URL"),
    ("GITHUB_MIN_PERMISSION", "owner", "GITHUB_MIN_PERMISSION: must be one of read, triage, write, "
                                       "maintain, admin, none, any"),
    ("HITL_API_KEYS", "a-secret-key-of-24-chars=alice,k-2-secret", "HITL_API_KEYS: entries look like "
     "key=principalId or key=principalId:role (role: operator, user or agent), and entry 2 does not"),
    ("HITL_API_KEYS", "a-secret-key-of-24-chars=alice,short-secret=bob:operator",
     "HITL_API_KEYS: the key of entry 2 is shorter than 24 characters"),
])
def test_a_bad_setting_is_one_line_naming_the_variable(tmp_path: Path, name: str, value: str, problem: str) -> None:
    env = {"DATABASE_URL": f"sqlite:///{tmp_path / 'hitl.db'}", "REDIS_URL": "", name: value}

    done = run_hitl("requests", **env)

    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"hitl: bad settings: {problem}"), done.stderr
    assert "Traceback" not in done.stderr and "secret" not in done.stderr  # an API key is never echoed


@pytest.mark.parametrize(("command", "url", "problem"), [
    ("requests", "postgresql://postgres:s3cret@127.0.0.1:1/hitl", "Connection refused"),  # nothing on port 1
    ("serve", "postgresql://postgres:s3cret@127.0.0.1:1/hitl", "Connection refused"),
])
def test_a_database_that_cannot_be_used_is_one_line(command: str, url: str, problem: str) -> None:
    """`hitl serve` too stops at once, where it used to serve 500s and log a traceback every sweep."""
    argv = [command, "--port=0"] if command == "serve" else [command]

    done = run_hitl(*argv, DATABASE_URL=url, REDIS_URL="", timeout=20)

    assert done.returncode != 0
    [line] = done.stderr.strip().splitlines()  # and no warning before it
    assert line.startswith("hitl: the database of DATABASE_URL cannot be used: "), done.stderr
    assert problem in line and "s3cret" not in line
    assert "serving" not in done.stdout


def test_a_worker_whose_redis_cannot_be_reached_is_one_line(tmp_path: Path) -> None:
    done = run_hitl("worker", DATABASE_URL=f"sqlite:///{tmp_path / 'hitl.db'}",
                    REDIS_URL="redis://:s3cret@127.0.0.1:1/0")  # nothing listens on port 1

    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("hitl: the Redis of REDIS_URL cannot be used: "), done.stderr
    assert "Connection refused" in last and "Traceback" not in done.stderr and "s3cret" not in done.stderr


def test_the_agent_module_is_found_in_the_working_directory_as_the_readme_runs_it(tmp_path: Path) -> None:
    (tmp_path / "myagents.py").write_text("from gateway.demo import agent as billing\n")
    migrated(tmp_path / "hitl.db")
    script = Path(sys.executable).parent / "hitl"  # the console script: its sys.path does not hold the directory

    done = subprocess.run([str(script), "requests"], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "HITL_AGENT": "myagents:billing",
                               "DATABASE_URL": f"sqlite:///{tmp_path / 'hitl.db'}", "REDIS_URL": ""})

    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("REQUEST ")


def test_a_bad_agent_is_one_clear_line_not_a_traceback(tmp_path: Path) -> None:
    migrated(tmp_path / "hitl.db")
    done = run_hitl("requests", DATABASE_URL=f"sqlite:///{tmp_path / 'hitl.db'}", HITL_AGENT="nope:agent",
                    REDIS_URL="")
    assert done.returncode != 0
    assert "HITL_AGENT" in done.stderr
    assert "Traceback" not in done.stderr
