"""Real PostgreSQL, Redis and a browser for tests: skip when they are missing, fail if HITL_REQUIRE_SERVICES=1."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import NoReturn
from urllib.parse import urlsplit

import pytest

DEFAULT_DATABASE_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/test"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
CHROMIUM = "/usr/bin/chromium"


def require_postgres() -> str:
    """The SQLAlchemy URL of the test PostgreSQL (`HITL_TEST_DATABASE_URL`), once it answers."""
    import psycopg
    from sqlalchemy.engine import make_url

    from engine.store.db import normalize_url

    url = normalize_url(os.environ.get("HITL_TEST_DATABASE_URL", DEFAULT_DATABASE_URL))
    try:
        psycopg.connect(conninfo(url), connect_timeout=2).close()
    except psycopg.Error as exc:
        error = str(exc)
    else:
        return url
    _unavailable(f"PostgreSQL at {make_url(url)!r} is unreachable: {error}")


def conninfo(url: str) -> str:
    """What psycopg connects to for the SQLAlchemy URL `url`."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def require_redis() -> str:
    """The URL of the test Redis (`HITL_TEST_REDIS_URL`), once it answers a PING."""
    import redis

    url = os.environ.get("HITL_TEST_REDIS_URL", DEFAULT_REDIS_URL)
    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        client.ping()
    except redis.RedisError as exc:
        error = str(exc)
    else:
        return url
    finally:
        client.close()
    _unavailable(f"Redis at {_without_password(url)} is unreachable: {error}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RedisServer:
    """A throwaway `redis-server` on a free port, without persistence, that a test stops and starts (the machine's
    shared Redis is never touched)."""

    def __init__(self, directory: Path) -> None:
        server = shutil.which("redis-server")
        if server is None:
            _unavailable("redis-server is not installed (apt-get install redis-server)")
        self.command = [server, "--port", str(free_port()), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--dir", str(directory)]
        self.url = f"redis://127.0.0.1:{self.command[2]}/0"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> RedisServer:
        import redis

        self.proc = subprocess.Popen(self.command, stdout=subprocess.DEVNULL)
        client = redis.Redis.from_url(self.url, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
            finally:
                client.close()
        return self

    def stop(self) -> None:
        """Stop it; whatever it held is gone (as when a Redis without persistence restarts)."""
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(10)
            self.proc = None


def require_browser() -> str:
    """The path of Debian's chromium, once it and the playwright package (which drives it) are installed."""
    missing = []
    if importlib.util.find_spec("playwright") is None:
        missing.append("the playwright package (pip install playwright; never `playwright install`)")
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} (apt-get install chromium)")
    if missing:
        _unavailable("browser tests need " + " and ".join(missing))
    return CHROMIUM


def _without_password(url: str) -> str:
    password = urlsplit(url).password
    return url.replace(f":{password}@", ":***@") if password else url


def _unavailable(reason: str) -> NoReturn:
    if os.environ.get("HITL_REQUIRE_SERVICES") == "1":
        pytest.fail(f"{reason} (HITL_REQUIRE_SERVICES=1)", pytrace=False)
    pytest.skip(f"{reason} (set HITL_REQUIRE_SERVICES=1 to make this a failure)")
