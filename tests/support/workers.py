"""`hitl worker` processes forked from a parent that imported the gateway once: the reliability suite kills and
replaces twenty of them.

`python -m gateway worker` spends 1 to 4 s of CPU importing on a busy machine before it takes a job; a fork of a
parent that has imported the same modules takes one within a tenth of a second. Each child runs what the `hitl`
console script runs, `gateway.cli.main(["worker"])`, in a session of its own (a process group a test can
SIGKILL), with the environment and log file it was given: the same process as `hitl worker` but for how it
started. The parent holds no connection and runs no thread when it forks.

Usage (the parent): python -m tests.support.workers, then one JSON line per worker on stdin,
`{"env": {...}, "log": "/path"}`; it answers each with the child's pid.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, NoReturn

PRELOADED = (
    "gateway.cli", "gateway.app", "engine.jobs.perform", "psycopg", "rq", "redis", "sqlalchemy.dialects.postgresql"
)
"""What `hitl worker` imports before it takes a job (the test agent is imported by each child: it reads the
child's environment when it is imported)."""


def serve() -> None:
    """The parent: import, then fork a worker for each line read."""
    for module in PRELOADED:
        importlib.import_module(module)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)  # children are reaped as they die (no zombie holds a pid)
    for line in sys.stdin:
        order = json.loads(line)
        sys.stdout.flush()
        pid = os.fork()
        if pid == 0:
            child(order["env"], order["log"])
        print(pid, flush=True)


def child(env: dict[str, str], log: str) -> NoReturn:
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # RQ waits for its scheduler process
    os.environ.clear()
    os.environ.update(env)
    out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    code = 1
    try:
        from gateway.cli import main

        main(["worker"])
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


class Forked:
    """A forked worker, with what tests use of a `subprocess.Popen`: its pid, `poll()` and `wait()`. It is not the
    test's child, so its exit status is unknown: `poll()` answers 0 once it is gone."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            state = "gone"
        if state in ("gone", "Z", "X"):
            self.returncode = 0
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired(f"worker {self.pid}", timeout or 0)
            time.sleep(0.02)
        return 0


class WorkerForge:
    """The parent process, seen from the test: `fork(env, log)` starts a worker."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "tests.support.workers"], cwd=root, env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def fork(self, env: dict[str, str], log: Path) -> Forked:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        order: dict[str, Any] = {"env": env, "log": str(log)}
        self.proc.stdin.write(json.dumps(order) + "\n")
        self.proc.stdin.flush()
        answer = self.proc.stdout.readline()
        if not answer:
            raise RuntimeError(f"the worker forge exited with {self.proc.wait(5)}")
        return Forked(int(answer))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(10)


if __name__ == "__main__":
    serve()
