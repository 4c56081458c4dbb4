"""Test stacks: SQLite with the in-process executor, and PostgreSQL + Redis with a real `hitl worker`."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient
from sqlalchemy import Engine, event, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session as DbSession

from engine.answers.conversation import Posted, post_message
from engine.answers.submit import ResponseResult, submit_responses
from engine.jobs.executors import InlineExecutor
from engine.jobs.recovery import HandOverPoll, Sweeper
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, api_key_principal
from engine.store.db import Database
from engine.store.queries import events_after, list_requests, session_history
from engine.store.tables import UNPROCESSED, Base, Inbound, Outbox, Session, Turn
from engine.turns.sessions import open_session
from gateway.app import create_app
from gateway.settings import Settings
from tests.support.services import require_postgres, require_redis
from tests.support.sqlite import seed_sqlite
from tests.support.workers import Forked, WorkerForge

ROOT = Path(__file__).resolve().parent.parent
TEST_AGENT = "tests.support.agent:agent"
KEYS = {
    "alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdefgh", "carol": "carol-key-0123456789abcdef",
    "bob:operator": "bob-operator-key-0123456789", "bot:agent": "bot-agent-key-0123456789ab",
}
"""The test keys, by who they act as (`principalId[:role]`): users alice, bob and carol; bob as an operator
(for an approval only bob may give, whatever session it is in); an agent, bot."""
API_KEYS = {key: who for who, key in KEYS.items()}


@pytest.fixture(autouse=True)
def ledger(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Every test starts with an empty tool ledger (shared with worker processes by path)."""
    path = Path(os.environ.setdefault("HITL_TEST_LEDGER", str(tmp_path_factory.getbasetemp() / "ledger.jsonl")))
    path.write_text("")
    yield path


class Stack:
    """One deployment shape: the app, its runtime, and a way to wait until every job has run."""

    def __init__(self, name: str, settings: Settings) -> None:
        self.name = name
        self.settings = settings
        seed_sqlite(settings.database_url)
        self.app = create_app(settings)
        self.rt: Runtime = self.app.extensions["hitl"]

    def client(self, who: str | None = "alice") -> FlaskClient:
        client = self.app.test_client()
        if who is not None:
            client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {KEYS[who]}"
        return client

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Wait until no job is left: no turn running or ready to run, no outbox row whose job has not started."""
        if isinstance(self.rt.executor, InlineExecutor):
            assert self.rt.executor.join(timeout), "in-process jobs did not finish"
            return
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.quiet():
                return
            time.sleep(0.05)
        with self.rt.db.read() as db:
            unstarted = db.execute(select(Outbox.job, Outbox.args)).all()
            busy = db.execute(select(Turn.id, Turn.status).where(Turn.status.in_(["queued", "running"]))).all()
        raise AssertionError(f"the worker did not finish within {timeout}s: outbox rows whose job has not started "
                             f"{unstarted}, turns still queued or running {busy}")

    def quiet(self) -> bool:
        queue = self.rt.executor.queue  # type: ignore[attr-defined]
        if queue.count or queue.started_job_registry.count:
            return False  # a job waits or runs
        with self.rt.db.read() as db:
            if db.execute(select(Outbox.id).limit(1)).first():
                return False
            if db.execute(select(Inbound.id).where(UNPROCESSED).limit(1)).first():
                return False
            if self.rt.channels and db.execute(select(Session.id).where(
                    Session.channel.in_(list(self.rt.channels)), Session.delivered_seq < Session.event_seq)
                    .limit(1)).first():
                return False
            turns = db.execute(select(Turn).where(Turn.status.in_(["queued", "running"]))).scalars().all()
            for turn in turns:
                if turn.status == "running":
                    return False
                earlier = db.execute(select(Turn.id).where(
                    Turn.session_id == turn.session_id, Turn.seq < turn.seq,
                    Turn.status.in_(["queued", "running", "waiting"]),
                )).first()
                if earlier is None:
                    return False
        return True

    # -- conversation helpers: the engine entry points, as a channel would call them ---------------

    def start(self, message: str, who: str | None = "alice") -> tuple[str, str]:
        """Open a session whose first turn is `message` from `who`; wait until it parks or ends."""
        opened = open_session(self.rt, api_key_principal(who) if who else None, message=message)
        self.wait_idle()
        assert opened.turn_id is not None
        return opened.session_id, opened.turn_id

    def pending(self, session_id: str) -> list[dict[str, Any]]:
        return list_requests(self.rt, status="pending", session_id=session_id)["requests"]

    def answer(self, request_id: str, option_id: str | None = None, text: str | None = None,
               who: str = "alice", wait: bool = True, edited: dict[str, Any] | None = None) -> ResponseResult:
        response = InputResponse(request_id=request_id, option_id=option_id, text=text, input=edited)
        [result] = submit_responses(self.rt, api_key_principal(who), [response])
        if wait:
            self.wait_idle()
        return result

    def say(self, session_id: str, text: str, who: str | None = "alice", turn_policy: str = "steer") -> Posted:
        """`who` sends a message to the session, as a channel or the API would; waits for the jobs."""
        posted = post_message(self.rt, session_id, api_key_principal(who) if who else None, text,
                              turn_policy)  # type: ignore[arg-type]
        self.wait_idle()
        return posted

    def events(self, session_id: str) -> list[dict[str, Any]]:
        return events_after(self.rt, session_id)

    def event_types(self, session_id: str) -> list[str]:
        return [e["type"] for e in self.events(session_id)]

    def history(self, session_id: str) -> dict[str, Any]:
        return session_history(self.rt, session_id)

    def turn(self, session_id: str, seq: int = 1) -> dict[str, Any]:
        return self.history(session_id)["turns"][seq - 1]

    def close(self) -> None:
        for thread in self.app.extensions.get("hitl-background", []):
            thread.stop()
        if isinstance(self.rt.executor, InlineExecutor):
            self.rt.executor.join()
            self.rt.executor.shutdown()
        self.rt.db.dispose()


def sqlite_settings(tmp_path: Path, **overrides: Any) -> Settings:
    fields: dict[str, Any] = {"sweep_seconds": 3600, **overrides}  # tests sweep when they mean to
    return Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}", agent=TEST_AGENT, api_keys=API_KEYS,
                    **fields)


@contextlib.contextmanager
def fresh_database(prefix: str = "hitl_test") -> Iterator[str]:
    """A PostgreSQL database of its own (so parallel runs never meet), migrated to head; dropped afterwards."""
    from sqlalchemy import create_engine

    base = require_postgres()
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    url = make_url(base).set(database=name).render_as_string(hide_password=False)
    db = Database(url)
    db.upgrade()
    db.dispose()
    try:
        yield url
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """This test session's PostgreSQL database."""
    with fresh_database() as url:
        yield url


@pytest.fixture(scope="session")
def redis_url() -> str:
    return require_redis()


@pytest.fixture(scope="session")
def queue_name() -> str:
    return f"test-{uuid.uuid4().hex[:12]}"


def worker_env(database_url: str, redis_url: str, queue: str, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "DATABASE_URL": database_url, "REDIS_URL": redis_url, "HITL_QUEUE": queue, "HITL_AGENT": TEST_AGENT,
        "HITL_SWEEP_SECONDS": "1", "PYTHONPATH": str(ROOT), **extra,
    })
    return env


def children(pid: int) -> list[int]:
    """Child processes of `pid`, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            if int(stat.read_text().rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(stat.parent.name))
    return found


class WorkerProcess:
    """A real `hitl worker` process (its own process group, so a test can SIGKILL it and its work horse); with a
    `forge`, forked from the forge's warm parent instead of started afresh (tests/support/workers.py)."""

    def __init__(self, env: dict[str, str], log_path: Path, forge: WorkerForge | None = None) -> None:
        self.env = env
        self.log_path = log_path
        self.log = log_path.open("ab")
        self.proc: subprocess.Popen[bytes] | Forked = forge.fork(env, log_path) if forge else subprocess.Popen(
            [sys.executable, "-m", "gateway", "worker"], cwd=ROOT, env=env, stdout=self.log,
            stderr=subprocess.STDOUT, start_new_session=True)

    def kill(self, sig: int = 9) -> None:
        """Signal the worker and its work horses (RQ puts each horse in a process group of its own).

        After a SIGKILL the job it ran stays in RQ's started registry until RQ's maintenance finds it
        abandoned; a worker of the same queue would do that minutes later, so the test does it now."""
        if self.proc.poll() is None:
            for pid in [*children(self.proc.pid), self.proc.pid]:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pid, sig) if pid == self.proc.pid else os.kill(pid, sig)
        self.proc.wait(10)
        self.log.close()
        if sig == 9:
            self.abandon_started_jobs()

    def abandon_started_jobs(self) -> None:
        from redis import Redis
        from rq import Queue

        with Redis.from_url(self.env["REDIS_URL"]) as connection:
            queue = Queue(self.env["HITL_QUEUE"], connection=connection)
            queue.started_job_registry.cleanup(timestamp=time.time() + 10**6)

    def tail(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:]

    def wait_ready(self, timeout: float = 30.0) -> WorkerProcess:
        """Until it listens on its queue (its sweeper runs by then)."""
        deadline = time.monotonic() + timeout
        while "*** Listening on" not in self.log_path.read_text(errors="replace"):
            assert self.proc.poll() is None and time.monotonic() < deadline, f"the worker did not start:\n{self.tail()}"
            time.sleep(0.05)
        return self


@contextlib.contextmanager
def more_workers(like: WorkerProcess, count: int, log_dir: Path) -> Iterator[list[WorkerProcess]]:
    """`count` more `hitl worker` processes with `like`'s environment (so its queue, and a sweep each), started
    and ready; stopped afterwards (those the test has not killed)."""
    workers = [WorkerProcess(like.env, log_dir / f"worker-{n}.log") for n in range(count)]
    try:
        yield [worker.wait_ready() for worker in workers]
    finally:
        for worker in workers:
            if worker.proc.poll() is None:
                worker.kill(15)


@pytest.fixture(scope="session")
def rq_worker(postgres_url: str, redis_url: str, queue_name: str,
              tmp_path_factory: pytest.TempPathFactory) -> Iterator[WorkerProcess]:
    worker = WorkerProcess(worker_env(postgres_url, redis_url, queue_name),
                           tmp_path_factory.mktemp("worker") / "worker.log")
    yield worker
    worker.kill(15)


WORKERS = pytest.StashKey[dict[str, tuple[WorkerProcess, str]]]()


def own_worker(request: pytest.FixtureRequest, name: str, **env: str) -> str:
    """The queue of this test session's `hitl worker` called `name`, which runs with `env` besides the usual
    environment (a channel's fake, the callback secret): started the first time a test asks for it, stopped when
    the session ends."""
    workers = request.config.stash.setdefault(WORKERS, {})
    if name not in workers:
        queue = f"{name}-{uuid.uuid4().hex[:12]}"
        log = request.getfixturevalue("tmp_path_factory").mktemp(f"{name}-worker") / "worker.log"
        workers[name] = (WorkerProcess(worker_env(request.getfixturevalue("postgres_url"),
                                                  request.getfixturevalue("redis_url"), queue, **env), log), queue)
        request.session.addfinalizer(lambda: workers[name][0].kill(15))
    worker, queue = workers[name]
    assert worker.proc.poll() is None, f"the worker died:\n{worker.tail()}"
    return queue


def truncate_all(url: str, attempts: int = 3) -> None:
    """Empty every table. The session's workers sweep meanwhile: a sweep that locked one table and waits for
    another can deadlock with the TRUNCATE, and when PostgreSQL picks the TRUNCATE to fail, it is tried again."""
    from psycopg.errors import DeadlockDetected
    from sqlalchemy import create_engine
    from sqlalchemy.exc import OperationalError

    engine = create_engine(url)
    names = ", ".join(t.name for t in Base.metadata.sorted_tables)
    try:
        for attempt in range(1, attempts + 1):
            try:
                with engine.begin() as conn:
                    conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))
                return
            except OperationalError as exc:
                if not isinstance(exc.orig, DeadlockDetected) or attempt == attempts:
                    raise
    finally:
        engine.dispose()


@contextlib.contextmanager
def make_stack(request: pytest.FixtureRequest, kind: str, tmp_path: Path, **overrides: Any) -> Iterator[Stack]:
    """A `kind` ("sqlite" or "postgres") stack; `overrides` are Settings fields (a channel's, say).

    The postgres stack shares this test session's RQ worker, which runs with the environment the worker
    fixture gave it: a test whose jobs need other settings (a channel's base URL) starts its own worker
    with `worker_env(...)` and a queue of its own.
    """
    if kind == "sqlite":
        built = Stack("sqlite", sqlite_settings(tmp_path, **overrides))
    else:
        url = request.getfixturevalue("postgres_url")
        truncate_all(url)
        fields = {"queue": request.getfixturevalue("queue_name"), **overrides}
        if fields["queue"] == request.getfixturevalue("queue_name"):
            worker: WorkerProcess = request.getfixturevalue("rq_worker")
            assert worker.proc.poll() is None, f"the worker died:\n{worker.tail()}"
        built = Stack("postgres", Settings(database_url=url, redis_url=request.getfixturevalue("redis_url"),
                                           agent=TEST_AGENT, api_keys=API_KEYS, **fields))
    try:
        yield built
    finally:
        built.close()


@contextlib.contextmanager
def recorded(target: Engine | type[DbSession], what: str) -> Iterator[list[Any]]:
    """While the block runs: an engine's `before_cursor_execute` statements or its `commit`s, or the ORM
    sessions' `after_flush`es (target: the Session class). Not those of the embedded server's periodic threads
    (the hand-over poll reads every second): they tick whenever their time comes, more often inside a block that
    runs slowly on a busy machine, and are no part of what the block does."""
    seen: list[Any] = []

    def record(*args: Any) -> None:
        if threading.current_thread().name not in (Sweeper.name, HandOverPoll.name):
            seen.append(args[2] if what == "before_cursor_execute" else args[0])

    event.listen(target, what, record)
    try:
        yield seen
    finally:
        event.remove(target, what, record)


@pytest.fixture(params=["sqlite", "postgres"])
def stack(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Stack]:
    """The same test on SQLite + in-process jobs, and on PostgreSQL + Redis + a real RQ worker process."""
    with make_stack(request, request.param, tmp_path) as built:
        yield built
