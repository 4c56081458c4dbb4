"""`hitl ...` as the tests run it: what a run did, and a run as a process of its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from engine.store.db import Database
from tests.conftest import ROOT


class Outcome:
    """What one `hitl ...` run did: its exit status, what it printed, and the message it exited with."""

    def __init__(self, code: int, out: str, err: str, message: str) -> None:
        self.code, self.out, self.err, self.message = code, out, err, message

    def json(self) -> Any:
        return json.loads(self.out)


def run_hitl(*argv: str, timeout: float = 60, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gateway", *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), **env})


def migrated(path: Path) -> None:
    """A SQLite database of the gateway at `path` (commands other than serve and db upgrade never create one)."""
    db = Database(f"sqlite:///{path}")
    db.upgrade()
    db.dispose()
