"""What `hitl` says before it does anything: which database, agent and job mode; that it serves, once it does;
and that a command meant to read a database does not make one."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest
import requests

from tests.conftest import ROOT, TEST_AGENT

COMMANDS = [["requests"], ["sessions"], ["show", "ses_x"], ["answer", "req_x", "approve"], ["resume", "turn_x"],
            ["sweep"]]


@pytest.mark.parametrize("argv", COMMANDS, ids=[argv[0] for argv in COMMANDS])
def test_a_command_never_creates_a_database_it_says_none_is_there(hitl: Any, tmp_path: Path, argv: list[str],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """Run from an empty directory on the default DATABASE_URL, `hitl requests` printed an empty table and left
    a new hitl.db behind."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("DATABASE_URL", raising=False)

    done = hitl(*argv)

    assert done.code == 1
    assert done.message == (f"hitl: no database at sqlite:///{tmp_path}/hitl.db: run this where `hitl serve` runs, "
                            "or point DATABASE_URL at the gateway's database (sqlite:////absolute/path/hitl.db, or "
                            "its postgresql:// URL)")
    assert done.out == "" and list(tmp_path.iterdir()) == []


def test_help_names_the_database_the_agent_and_the_job_mode(hitl: Any, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    for name in ("DATABASE_URL", "REDIS_URL", "HITL_QUEUE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HITL_AGENT", TEST_AGENT)

    embedded = hitl("--help").out

    assert embedded.endswith(f"here (from the environment, and .env in this directory):\n"
                             f"  database  sqlite:///{tmp_path}/hitl.db\n  agent     {TEST_AGENT}\n"
                             "  jobs      in-process\n")
    assert list(tmp_path.iterdir()) == []

    monkeypatch.setenv("DATABASE_URL", "postgresql://hitl:pg-s3cret@db.example:5432/hitl")
    monkeypatch.setenv("REDIS_URL", "redis://:redis-s3cret@cache.example:6379/0")
    deployed = hitl("--help").out

    assert deployed.endswith("  database  postgresql://hitl:***@db.example:5432/hitl\n"
                             f"  agent     {TEST_AGENT}\n"
                             "  jobs      on the RQ queue hitl at redis://:***@cache.example:6379/0 "
                             "(run `hitl worker`)\n")
    assert "s3cret" not in deployed


def test_version_and_what_serve_takes(hitl: Any) -> None:
    assert hitl("--version").out == f"hitl {version('hitl-gateway')}\n"
    serve = " ".join(hitl("serve", "--help").out.split())
    assert "--host HOST the address to listen on (default: 127.0.0.1, this machine only" in serve
    assert "--port PORT the port to listen on (default: 8000; 0: a free one" in serve


def test_serve_on_a_sqlite_file_that_cannot_be_opened_stops_at_once(hitl: Any, env: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "sqlite:////nonexistent-folder/hitl.db")

    done = hitl("serve", "--port", "0")

    assert done.message == "hitl: the database of DATABASE_URL cannot be used: unable to open database file"
    assert done.out == ""


def test_serve_says_it_serves_once_the_port_is_bound_and_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DATABASE_URL": "sqlite:///hitl.db", "REDIS_URL": "",
           "HITL_AGENT": TEST_AGENT}
    argv = [sys.executable, "-m", "gateway", "serve", "--port"]
    server = subprocess.Popen([*argv, "0"], cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        assert server.stdout is not None
        line = server.stdout.readline()
        assert line.startswith("hitl-gateway serving http://127.0.0.1:"), line
        url = line.split()[2]
        assert line.strip() == (f"hitl-gateway serving {url} (database sqlite:///{tmp_path}/hitl.db, agent "
                                f"{TEST_AGENT}, jobs in-process)")
        assert requests.get(f"{url}/healthz", timeout=5).status_code == 200  # bound before it said so

        taken = subprocess.run([*argv, url.rsplit(":", 1)[1]], cwd=tmp_path, env=env, capture_output=True, text=True,
                               timeout=30)

        assert taken.returncode == 1 and taken.stdout == ""
        assert taken.stderr.strip().splitlines() == [
            f"hitl: cannot listen on 127.0.0.1 port {url.rsplit(':', 1)[1]}: Address already in use (another "
            "`hitl serve`? --port picks another)"]
    finally:
        server.terminate()
        server.wait(10)
