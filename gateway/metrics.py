"""`GET /metrics`: Prometheus text exposition, computed from the database on each scrape.

Every number comes from aggregate queries over the shared database, so any web process answers for the
whole deployment: scrape one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from flask import Blueprint, Response, current_app
from sqlalchemy import ColumnElement, case, func, select
from sqlalchemy.orm import Session as DbSession

from engine.channels.inbound import NOTICE
from engine.jobs.runtime import Runtime
from engine.store.statuses import RequestStatus, RunStatus, TurnStatus
from engine.store.tables import Inbound, InputRequest, PrunedInbound, Run, Turn

from .auth import current_caller

bp = Blueprint("metrics", __name__)

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
KINDS = ("tool-approval", "question", "session-limit")
TURN_STATUSES: tuple[str, ...] = tuple(TurnStatus)
DECISION_BUCKETS = (1, 5, 15, 60, 300, 900, 3600)

@dataclass
class Family:
    """One metric family: its HELP and TYPE lines and its samples."""

    name: str
    type: str
    help: str
    samples: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def add(self, value: float, suffix: str = "", **labels: str) -> None:
        self.samples.append((suffix, labels, value))

    def render(self) -> str:
        lines = [f"# HELP {self.name} {self.help}", f"# TYPE {self.name} {self.type}"]
        for suffix, labels, value in self.samples:
            rendered = ",".join(f'{key}="{escape(str(text))}"' for key, text in labels.items())
            lines.append(f"{self.name}{suffix}{{{rendered}}} {number(value)}" if labels
                         else f"{self.name}{suffix} {number(value)}")
        return "\n".join(lines) + "\n"


def escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


@bp.get("/metrics")
def metrics() -> Response:
    current_caller().require_operator("only an operator's key may read the metrics: they count every session")
    rt: Runtime = current_app.extensions["hitl"]
    return Response("".join(family.render() for family in collect(rt)), content_type=CONTENT_TYPE)


def collect(rt: Runtime) -> list[Family]:
    with rt.db.read() as db:
        families = request_families(db, rt.now())
        families.append(decision_histogram(db, seconds_between(InputRequest.created_at, InputRequest.resolved_at,
                                                               sqlite=rt.db.is_sqlite)))
        families += turn_families(db)
        families += webhook_families(db)
    return families


def request_families(db: DbSession, now: datetime) -> list[Family]:
    total = Family("hitl_input_requests_total", "counter",
                   "Input requests opened, by kind and by where they are now: status and outcome.")
    pending = Family("hitl_input_requests_pending", "gauge", "Input requests waiting on a person, by kind.")
    waiting = dict.fromkeys(KINDS, 0)
    rows = db.execute(
        select(InputRequest.kind, InputRequest.status, InputRequest.outcome, func.count())
        .group_by(InputRequest.kind, InputRequest.status, InputRequest.outcome)
        .order_by(InputRequest.kind, InputRequest.status, InputRequest.outcome)
    ).all()
    for kind, status, outcome, count in rows:
        total.add(count, kind=kind, status=status, outcome=outcome or "")
        if status == RequestStatus.PENDING:
            waiting[kind] = waiting.get(kind, 0) + count
    for kind, count in waiting.items():
        pending.add(count, kind=kind)
    oldest = db.execute(select(func.min(InputRequest.created_at))
                        .where(InputRequest.status == RequestStatus.PENDING)).scalar()
    age = Family("hitl_input_request_oldest_pending_age_seconds", "gauge",
                 "Seconds the oldest pending input request has waited (0 when none is pending).")
    age.add(max((now - oldest).total_seconds(), 0.0) if oldest else 0)
    return [total, pending, age]


def seconds_between(start: Any, end: Any, *, sqlite: bool) -> ColumnElement[Any]:
    if sqlite:
        return (func.julianday(end) - func.julianday(start)) * 86400.0
    return func.extract("epoch", end - start)


def decision_histogram(db: DbSession, seconds: ColumnElement[Any]) -> Family:
    """Time from opening to resolving an input request, by kind, bucketed in SQL."""
    family = Family("hitl_input_request_decision_seconds", "histogram",
                    "Seconds from opening an input request to its resolution, by kind.")
    buckets = [func.sum(case((seconds <= bound, 1), else_=0)) for bound in DECISION_BUCKETS]
    rows = {
        row[0]: row[1:]
        for row in db.execute(
            select(InputRequest.kind, func.count(), func.sum(seconds), *buckets)
            .where(InputRequest.status == RequestStatus.RESOLVED, InputRequest.resolved_at.is_not(None))
            .group_by(InputRequest.kind)
        ).all()
    }
    for kind in sorted(set(KINDS) | set(rows)):
        count, total, *within = rows.get(kind) or (0, 0, *[0] * len(DECISION_BUCKETS))
        for bound, value in zip(DECISION_BUCKETS, within, strict=True):
            family.add(value or 0, "_bucket", kind=kind, le=str(bound))
        family.add(count, "_bucket", kind=kind, le="+Inf")
        family.add(float(total or 0), "_sum", kind=kind)
        family.add(count, "_count", kind=kind)
    return family


def turn_families(db: DbSession) -> list[Family]:
    turns = Family("hitl_turns", "gauge", "Turns by status.")
    by_status = dict.fromkeys(TURN_STATUSES, 0)
    by_status.update({status: count for status, count in db.execute(
        select(Turn.status, func.count()).group_by(Turn.status)
    ).all()})
    for status, count in by_status.items():
        turns.add(count, status=status)
    failures = Family("hitl_job_failures_total", "counter",
                      "Failed work: turns that ended failed (reason=turn_failed) and runs whose worker or database "
                      "connection was lost (reason=run_crashed; their turns were resumed).")
    failures.add(by_status["failed"], reason="turn_failed")
    failures.add(db.execute(select(func.count()).select_from(Run).where(Run.status == RunStatus.CRASHED)).scalar_one(),
                 reason="run_crashed")
    return [turns, failures]


def webhook_families(db: DbSession) -> list[Family]:
    deliveries = Family("hitl_webhook_deliveries_total", "counter",
                        "Webhook deliveries accepted (verified and new), by channel.")
    duplicates = Family("hitl_webhook_duplicates_total", "counter",
                        "Webhook deliveries dropped as duplicates (platform retries, redeliveries), by channel.")
    kept = db.execute(
        select(Inbound.channel, func.count(), func.coalesce(func.sum(Inbound.duplicates), 0))
        .where(~Inbound.external_id.startswith(NOTICE)).group_by(Inbound.channel)
    ).all()
    pruned = db.execute(select(PrunedInbound.channel, PrunedInbound.deliveries, PrunedInbound.duplicates)).all()
    totals: dict[str, list[int]] = {}
    for channel, count, repeats in [*kept, *pruned]:  # rows kept, and those sweep() pruned (counted then)
        total = totals.setdefault(channel, [0, 0])
        total[0] += count
        total[1] += int(repeats)
    for channel, (count, repeats) in sorted(totals.items()):
        deliveries.add(count, channel=channel)
        duplicates.add(repeats, channel=channel)
    return [deliveries, duplicates]
