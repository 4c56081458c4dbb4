"""Parked turns in bulk: one real turn parks through the engine, then its rows are copied N times with COPY.

Copying the rows the engine itself wrote (every table, every column, ids renamed) keeps the seeded turns
consistent with the tables whatever the engine writes on a park: a seeded turn settles and resumes exactly
like the real one would.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from sqlalchemy import Table

from engine.channels.contract import ChannelAdapter
from engine.jobs.executors import InlineExecutor
from engine.protocol import Principal, operator_principal
from engine.store.storage import new_id, pack_id, unpack_id
from engine.store.tables import Base
from engine.turns.sessions import open_session

from .stack import Target, harness_runtime

BATCH = 5000
"""Copied turns per transaction."""

REQUESTER = operator_principal("bench")


@dataclass(frozen=True)
class Parked:
    session_id: str
    turn_id: str
    request_id: str


def park_template(target: Target, *, principal: Principal = REQUESTER, channel: str = "api",
                  address: str | None = None, adapter: ChannelAdapter | None = None) -> Parked:
    """Run one real turn in this process until it parks on its approval (and its card is shown, when the
    session is at a channel's `address` and `adapter` is that channel)."""
    executor = InlineExecutor(1)
    rt = harness_runtime(target, executor, {adapter.name: adapter} if adapter else None)
    try:
        opened = open_session(rt, principal, channel=channel, address=address, message="go")
        executor.join()
    finally:
        executor.shutdown()
        rt.db.dispose()
    with psycopg.connect(target.conninfo) as conn:
        row = conn.execute("SELECT turn_id, request_id FROM input_requests WHERE session_id = %s AND status = "
                           "'pending'", (pack_id(opened.session_id),)).fetchone()
    if row is None:
        raise RuntimeError(f"the template turn of session {opened.session_id} did not park")
    return Parked(opened.session_id, unpack_id(row[0]), unpack_id(row[1]))


def _copy_text(value: Any) -> str:
    """One value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, bytes):  # bytea's hex form
        text = "\\x" + value.hex()
    elif isinstance(value, datetime):
        text = value.isoformat()
    elif isinstance(value, dict | list):
        text = json.dumps(value)
    else:
        text = str(value)
    return text.replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n").replace("\r", "\\r")


class Cloner:
    """The template's rows as COPY lines with its ids as format fields; each clone gets fresh ids."""

    def __init__(self, target: Target, template: Parked) -> None:
        self.target = target
        self.template = template
        self.lines: list[tuple[Table, list[str], list[str]]] = []  # table, columns, line templates
        with psycopg.connect(target.conninfo) as conn:
            rows = {table: self._rows(conn, table) for table in Base.metadata.sorted_tables}
        self.ids = self._ids(rows)
        # an id is written as itself in text and JSON, and packed in an id column: one field for each form
        fields = {old: f"{{{n}}}" for n, old in enumerate(self.ids)}
        fields |= {_copy_text(pack_id(old)): f"{{{n + len(self.ids)}}}" for n, old in enumerate(self.ids)}
        pattern = re.compile("|".join(re.escape(form) for form in sorted(fields, key=len, reverse=True)))
        for table, (columns, values) in rows.items():
            if not values:
                continue
            templates = []
            for row in values:
                line = "\t".join(_copy_text(v) for v in row) + "\n"
                line = line.replace("{", "{{").replace("}", "}}")
                templates.append(pattern.sub(lambda m: fields[m.group(0)], line))
            self.lines.append((table, columns, templates))

    def _rows(self, conn: psycopg.Connection[Any], table: Table) -> tuple[list[str], list[tuple[Any, ...]]]:
        """The template's rows of `table` (without serial ids, which the copies draw afresh)."""
        auto = table.autoincrement_column
        columns = [c.name for c in table.columns if c is not auto]
        t = self.template
        wheres: dict[str, tuple[str, tuple[str | bytes, ...]]] = {
            "sessions": ("id = %s", (pack_id(t.session_id),)),
            "runs": ("turn_id = %s", (pack_id(t.turn_id),)),
            "tool_calls": ("turn_id = %s", (pack_id(t.turn_id),)),
            "response_candidates": ("request_id = %s", (pack_id(t.request_id),)),
            "outbox": ("args::text LIKE %s OR args::text LIKE %s", (f"%{t.turn_id}%", f"%{t.session_id}%")),
        }
        where = wheres.get(table.name)
        if where is None and "session_id" in table.columns:
            where = ("session_id = %s", (pack_id(t.session_id),))
        if where is None:
            return columns, []
        sql = f"SELECT {', '.join(columns)} FROM {table.name} WHERE {where[0]}"
        return columns, list(conn.execute(sql.encode(), where[1]).fetchall())

    @staticmethod
    def _ids(rows: dict[Table, tuple[list[str], list[tuple[Any, ...]]]]) -> list[str]:
        """Every id in a primary key of the template (session, turn, run, call, request ids)."""
        ids = []
        for table, (columns, values) in rows.items():
            keys = [columns.index(c.name) for c in table.primary_key.columns if c.name in columns]
            ids += [unpack_id(row[i]) for row in values for i in keys if isinstance(row[i], bytes)]
        return sorted(set(ids), key=len, reverse=True)

    def clone(self, count: int) -> list[Parked]:
        """`count` more parked turns, copied in batches; returns their session, turn and request ids."""
        index = {old: n for n, old in enumerate(self.ids)}
        t = self.template
        parked: list[Parked] = []
        with psycopg.connect(self.target.conninfo) as conn:
            for start in range(0, count, BATCH):
                fresh = [[new_id(old.split('_', 1)[0]) for old in self.ids]
                         for _ in range(min(BATCH, count - start))]
                for table, columns, templates in self.lines:
                    with conn.cursor().copy(f"COPY {table.name} ({', '.join(columns)}) FROM STDIN".encode()) as cp:
                        cp.write("".join(line.format(*ids, *(_copy_text(pack_id(i)) for i in ids))
                                         for ids in fresh for line in templates))
                conn.commit()
                parked += [Parked(ids[index[t.session_id]], ids[index[t.turn_id]], ids[index[t.request_id]])
                           for ids in fresh]
            conn.autocommit = True
            conn.execute(f"ANALYZE {', '.join(table.name for table, _, _ in self.lines)}".encode())
        return parked
