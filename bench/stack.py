"""The deployment under test: a dedicated PostgreSQL database and Redis queue, gunicorn and `hitl worker`s.

Every process is started here, in a session of its own, and stopped here by its pid.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import requests
from redis import Redis
from rq import Queue, Worker
from sqlalchemy.engine import make_url

from engine.channels.contract import ChannelAdapter
from engine.jobs.executors import RQExecutor
from engine.jobs.runtime import Executor, Runtime
from engine.store.db import Database, normalize_url
from engine.store.tables import Base
from gateway.compose import load_agent

ROOT = Path(__file__).resolve().parent.parent
AGENT = "bench.agent:agent"


@dataclass(frozen=True)
class Target:
    """Where the bench runs: its own database (SQLAlchemy URL), Redis URL and queue name, and its log folder."""

    database_url: str
    redis_url: str
    queue: str
    logs: Path

    @property
    def conninfo(self) -> str:
        """The same database as a plain psycopg connection string."""
        return conninfo(self.database_url)


def conninfo(url: str) -> str:
    return make_url(normalize_url(url)).set(drivername="postgresql").render_as_string(hide_password=False)


def database_url(base: str, name: str) -> str:
    return make_url(normalize_url(base)).set(database=name).render_as_string(hide_password=False)


def recreate_database(base: str, name: str) -> str:
    """Drop and create database `name` on the server of `base`; returns its URL (not yet migrated)."""
    with psycopg.connect(conninfo(base), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')
    return database_url(base, name)


def drop_database(base: str, name: str) -> None:
    with psycopg.connect(conninfo(base), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_database(base: str, name: str) -> str:
    """Database `name`, dropped and created afresh on the server of `base`, migrated; returns its URL."""
    url = recreate_database(base, name)
    db = Database(url)
    db.upgrade()
    db.dispose()
    return url


def truncate_engine_tables(target: Target, attempts: int = 5) -> None:
    """Empty every engine table. A worker's sweep may hold row locks on some of them meanwhile and ask for
    another: PostgreSQL then breaks the deadlock by failing one side, and the truncate tries again."""
    names = ", ".join(t.name for t in Base.metadata.sorted_tables)
    with psycopg.connect(target.conninfo, autocommit=True) as conn:
        for attempt in range(attempts):
            try:
                conn.execute(f"TRUNCATE {names} RESTART IDENTITY CASCADE")
                return
            except psycopg.errors.DeadlockDetected:
                if attempt == attempts - 1:
                    raise
                time.sleep(0.5)


def harness_runtime(target: Target, executor: Executor, channels: dict[str, ChannelAdapter] | None = None) -> Runtime:
    """The bench process's own runtime on the bench database: engine-level calls, as a web process makes them."""
    return Runtime(Database(target.database_url), load_agent(AGENT), executor, channels=channels, agent_spec=AGENT)


def rq_executor(target: Target) -> RQExecutor:
    return RQExecutor(target.redis_url, target.queue)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_kib(pid: int) -> int:
    """Resident memory of a process, from /proc/<pid>/status."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise LookupError(f"no VmRSS for pid {pid}")


def _stats() -> Iterator[tuple[int, str, list[str]]]:
    """Every process's pid, command name and the fields of /proc/<pid>/stat after the name."""
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError):
            text = stat.read_text()
            name, fields = text[text.index("(") + 1:text.rindex(")")], text.rsplit(")", 1)[1].split()
            yield int(stat.parent.name), name, fields


def child_pids(pid: int) -> list[int]:
    return sorted(found for found, _, fields in _stats() if int(fields[1]) == pid)


CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SERVERS = {"postgres": "postgres", "redis": "redis-server"}
"""Roles whose CPU is read by command name: the servers on this machine."""


def cpu_seconds(roles: dict[str, list[int]]) -> dict[str, float]:
    """CPU time (user + system) spent so far by each role's processes and by PostgreSQL's and Redis's processes
    on this machine; a process's children that have exited count with it (a fork worker's work horses, a
    closed connection's backend)."""
    spent = dict.fromkeys([*roles, *SERVERS], 0.0)
    role_of = {pid: role for role, pids in roles.items() for pid in pids}
    for pid, name, fields in _stats():
        role = role_of.get(pid) or next((r for r, command in SERVERS.items() if name.startswith(command)), None)
        if role is not None:
            spent[role] += sum(int(f) for f in fields[11:15]) / CLOCK_TICKS  # utime stime cutime cstime
    return spent


def cpu_ms_per(before: dict[str, float], after: dict[str, float], count: int) -> dict[str, float]:
    """Each role's CPU milliseconds per item between two `cpu_seconds` readings."""
    return {role: round((after[role] - before[role]) / count * 1000, 1) for role in after}


def wait_for(check: Callable[[], bool], timeout: float, what: str, interval: float = 0.05) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")
        time.sleep(interval)


class Process:
    """A child process in a session of its own, logging to a file; stopped by its pid (and group)."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], logs: Path) -> None:
        self.name = name
        self.log_path = logs / f"{name}.log"
        self.log = self.log_path.open("ab")
        self.log_start = self.log.tell()
        self.proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=self.log, stderr=subprocess.STDOUT,
                                     start_new_session=True)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def output(self) -> str:
        """What this process has written to its log so far."""
        with self.log_path.open("rb") as log:
            log.seek(self.log_start)
            return log.read().decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM the process's group, then SIGKILL it and its children (an RQ work horse has a group of
        its own) if it lingers."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            children = child_pids(self.proc.pid) if sig == signal.SIGKILL else []
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, sig)
            for pid in children:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout)
        self.log.close()


class Deployment:
    """gunicorn (2 workers) serving `gateway.asgi:create_asgi_app()` and N `hitl worker` processes, on `target`."""

    def __init__(self, target: Target, sweep_seconds: float, extra_env: dict[str, str] | None = None) -> None:
        self.target = target
        self.extra_env = {"HITL_SWEEP_SECONDS": str(sweep_seconds), **(extra_env or {})}
        self.web: Process | None = None
        self.port = 0
        self.workers: list[Process] = []
        self.redis = Redis.from_url(target.redis_url)

    def env(self, **extra: str) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HITL_", "SLACK_", "TWILIO_", "GITHUB_"))}
        env.update({
            "DATABASE_URL": self.target.database_url, "REDIS_URL": self.target.redis_url,
            "HITL_QUEUE": self.target.queue, "HITL_AGENT": AGENT,
            "PYTHONPATH": str(ROOT), **self.extra_env, **extra,
        })
        return env

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start_web(self, workers: int = 2) -> None:
        """The Procfile's web command, bound to loopback."""
        self.port = free_port()
        argv = [sys.executable, "-m", "gunicorn", "--workers", str(workers), "--worker-class", "asgi",
                "--worker-connections", "1000", "--bind", f"127.0.0.1:{self.port}", "gateway.asgi:create_asgi_app()"]
        self.web = Process("web", argv, self.env(), self.target.logs)
        wait_for(self._web_ready, 60, "gunicorn start-up", interval=0.2)
        wait_for(lambda: len(self.web_pids()) == workers, 30, "gunicorn workers", interval=0.2)

    def _web_ready(self) -> bool:
        assert self.web is not None
        if not self.web.alive():
            raise RuntimeError(f"gunicorn exited; see {self.target.logs / 'web.log'}")
        try:
            return requests.get(f"{self.base_url}/healthz", timeout=2).status_code == 200
        except requests.RequestException:
            return False

    def web_pids(self) -> list[int]:
        return child_pids(self.web.pid) if self.web else []

    def start_workers(self, count: int, worker_class: str) -> None:
        """`count` more `hitl worker` processes of `worker_class` (fork|simple); waits until RQ lists them all."""
        queue = Queue(self.target.queue, connection=self.redis)
        for _ in range(count):
            name = f"worker-{worker_class}-{len(self.workers) + 1}"
            self.workers.append(Process(name, [sys.executable, "-m", "gateway", "worker"],
                                        self.env(HITL_WORKER_CLASS=worker_class), self.target.logs))

        def ready() -> bool:
            dead = [w.name for w in self.workers if not w.alive()]
            if dead:
                raise RuntimeError(f"{dead} exited; see {self.target.logs}")
            listed = {w.pid for w in Worker.all(connection=self.redis, queue=queue)}
            return listed >= set(self.worker_pids())

        wait_for(ready, 60, f"{len(self.workers)} hitl workers", interval=0.2)

    def quiesce(self, timeout: float = 120.0) -> None:
        """Drop every job still queued or waiting for a retry, and wait for the running ones to finish."""
        queue = Queue(self.target.queue, connection=self.redis)

        def idle() -> bool:
            queue.empty()  # again each time: a job that was running may have enqueued another
            for job_id in queue.scheduled_job_registry.get_job_ids():
                queue.scheduled_job_registry.remove(job_id, delete_job=True)
            return queue.started_job_registry.count == 0 and queue.count == 0

        wait_for(idle, timeout, "the running jobs to finish", interval=0.2)

    def worker_pids(self) -> list[int]:
        return [w.pid for w in self.workers]

    def stop_workers(self) -> None:
        for worker in self.workers:
            worker.stop()
        self.workers = []

    def close(self) -> None:
        self.stop_workers()
        if self.web is not None:
            self.web.stop()
            self.web = None
        Queue(self.target.queue, connection=self.redis).delete(delete_jobs=True)
        self.redis.close()
