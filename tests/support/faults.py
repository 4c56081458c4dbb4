"""Fault points: a worker stops dead at a named point of its work, for the test to SIGKILL it there.

The test arms one point at a time (`arm()`: its name, written to the file HITL_TEST_FAULTS names). A process that
reaches the armed point disarms it, notes `{"tool": "fault", "point": ..., "pid": ...}` in the tool ledger
(`reached()` reads it: tests/support/ledger.py) and waits to be killed. The test agent installs the hooks when
it is imported in a process whose environment names the file (the reliability suite's workers); other processes
have none.

Points:
* `sql:<write>`: just before the statement of a write of WRITES runs;
* `commit:<write>`: just before the COMMIT of a transaction that made that write;
* `committed:<write>`: just after that COMMIT (as its connection goes back to the pool);
* `tool:<name>`: a test tool has done its work (noted it in the ledger) and has not returned yet.
A fake platform holds a call the same way (`slack:<method>` in tests/support/fake_slack.py).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, event
from sqlalchemy.pool import Pool

from tests.support.ledger import append, read_ledger

ARMED = "HITL_TEST_FAULTS"
"""The environment variable naming the file that holds the armed point."""
ANY = object()
MADE, COMMITTED = "hitl_fault_writes", "hitl_fault_committed"
"""Keys of a connection's `info`: the writes of its open transaction, and those of the one it just committed."""


@dataclass(frozen=True)
class Write:
    """An UPDATE of `table` whose parameter `param` is `value` (any value: ANY)."""

    table: str
    param: str
    value: Any = ANY

    def made_by(self, statement: str, parameters: Any) -> bool:
        return (statement.startswith(f"UPDATE {self.table} SET") and isinstance(parameters, dict)
                and self.param in parameters and (self.value is ANY or parameters[self.param] == self.value))


WRITES = {
    "inbound-applied": Write("inbound", "inbound"),  # an inbound item's compare-and-set (engine.channels.inbound)
    "settle": Write("input_requests", "outcome", "approved"),  # a request's compare-and-set, by an approve
    "claim": Write("runs", "status", "running"),  # a resumed turn's run starts
    "call-running": Write("tool_calls", "status", "running"),  # a call's mark, before its tool runs
    "call-completed": Write("tool_calls", "status", "completed"),  # a tool's result
    "turn-waiting": Write("turns", "status", "waiting"),  # a run parks on people
    "turn-completed": Write("turns", "status", "completed"),
    "delivered": Write("sessions", "seq"),  # a delivery moves the session's cursor (engine.channels.delivery.release)
}


def install() -> None:
    """Hook every engine and pool of this process, if its environment names the file of the armed point."""
    if not os.environ.get(ARMED):
        return
    event.listen(Engine, "before_cursor_execute", _before_statement)
    event.listen(Engine, "commit", _before_commit)
    event.listen(Engine, "rollback", _rolled_back)
    event.listen(Pool, "checkin", _checked_in)


def _before_statement(conn: Connection, cursor: Any, statement: str, parameters: Any, context: Any,
                      executemany: bool) -> None:
    for name, write in WRITES.items():
        if write.made_by(statement, parameters):
            reach(f"sql:{name}")
            conn.info.setdefault(MADE, set()).add(name)


def _before_commit(conn: Connection) -> None:
    made = conn.info.pop(MADE, set())
    for name in sorted(made):
        reach(f"commit:{name}")
    conn.info[COMMITTED] = made


def _rolled_back(conn: Connection) -> None:
    if not conn.invalidated:  # (a lost connection's info goes with it; reading it would try to reconnect)
        conn.info.pop(MADE, None)


def _checked_in(dbapi_connection: Any, record: Any) -> None:
    for name in sorted(record.info.pop(COMMITTED, set()) if record is not None else ()):
        reach(f"committed:{name}")


def reach(point: str) -> None:
    """If `point` is armed: disarm it, note it in the ledger, and wait to be killed."""
    if not os.environ.get(ARMED):
        return
    path = Path(os.environ[ARMED])
    try:
        armed = path.read_text().strip()
    except FileNotFoundError:
        return
    if armed != point:
        return
    path.write_text("")
    note(point, os.getpid())
    while True:
        time.sleep(60)


def note(point: str, pid: int | None) -> None:
    append({"tool": "fault", "point": point, "pid": pid})


# -- the test's side ------------------------------------------------------------------------------------------


def arm(path: Path, point: str) -> int:
    """Arm `point`; returns where the ledger stands, for `reached()`."""
    path.write_text(point)
    return len(read_ledger())


def reached(point: str, since: int) -> bool:
    """Whether a process noted `point` in the ledger after its first `since` entries."""
    return any(e["tool"] == "fault" and e["point"] == point for e in read_ledger()[since:])
