"""The tool ledger: a JSON-lines file, named by HITL_TEST_LEDGER, that the test process and worker processes share.
Test tools note what they did in it (tests/support/agent.py), and a process stopped at a fault point notes that
(tests/support/faults.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any


def ledger_path() -> Path:
    return Path(os.environ.get("HITL_TEST_LEDGER", "/tmp/hitl-test-ledger.jsonl"))


def append(entry: dict[str, Any]) -> None:
    with ledger_path().open("a") as f:
        f.write(json.dumps(entry) + "\n")


def read_ledger() -> list[dict[str, Any]]:
    path = ledger_path()
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
