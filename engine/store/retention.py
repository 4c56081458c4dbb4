"""What is kept and for how long: sweep() prunes inbound rows older than the retention that have nothing left to do.

An inbound row exists to deduplicate its delivery (a platform's retry or redelivery) and to let a job apply its
item. Once applied, or when it carries nothing to apply (audit only), it is needed only as long as the platform
may send the same delivery again: minutes to days, far less than the retention (HITL_RETENTION_DAYS, 30 days
by default). Rows whose item was never applied are kept whatever their age: the sweep still owes them their job.
A notice's claim (a person told once why they were turned away) is such a row too: past the retention, the
next ignored item of theirs tells them again.
A platform group's stored members (engine/channels/groups.py) are replaced each time it is looked up, so they
grow only with the groups named; a group not looked up within the retention is deleted with its members (its
members then see no request through it until it is looked up again).
The audit trail (sessions, turns, runs, requests, candidates, tool calls, events, messages) is never pruned, and
the outbox needs no pruning: a job's row is deleted when the job starts.
"""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from typing import Any, cast

from sqlalchemy import Table, delete, or_, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session as DbSession

from engine import defaults
from engine.channels.inbound import NOTICE
from engine.jobs.runtime import Runtime
from engine.store.tables import Inbound, PlatformGroup, PrunedInbound

_PRUNED = cast(Table, PrunedInbound.__table__)


def prune(rt: Runtime, batch: int = defaults.PRUNE_BATCH) -> int:
    """Delete at most `batch` inbound rows (the oldest first) received more than `rt.retention_days` ago that are
    processed or carry no item; their deliveries and duplicates are added to their channel's tally (`/metrics`
    counts both). Several sweepers at once each take rows the others have not locked. Platform groups last looked
    up before then go too."""
    cutoff = rt.now() - timedelta(days=rt.retention_days)
    done = select(Inbound.id).where(
        Inbound.received_at < cutoff, or_(Inbound.processed_at.is_not(None), Inbound.item.is_(None))
    ).order_by(Inbound.received_at).limit(batch).with_for_update(skip_locked=True)
    with rt.transaction() as db:
        pruned = db.execute(
            delete(Inbound).where(Inbound.id.in_(done.scalar_subquery()))
            .returning(Inbound.channel, Inbound.external_id, Inbound.duplicates)
        ).all()
        tally(db, [(channel, duplicates) for channel, external_id, duplicates in pruned
                   if not external_id.startswith(NOTICE)])  # a notice's claim is no delivery
        db.execute(delete(PlatformGroup).where(PlatformGroup.fetched_at < cutoff))  # (its members with it)
    return len(pruned)


def tally(db: DbSession, deliveries: list[tuple[str, int]]) -> None:
    """Add pruned deliveries, (channel, its duplicates) each, to their channels' tallies."""
    counts, repeats = Counter[str](), Counter[str]()
    for channel, duplicates in deliveries:
        counts[channel] += 1
        repeats[channel] += duplicates
    if not counts:
        return
    connection = db.connection()
    insert: Any = pg_insert if connection.dialect.name == "postgresql" else sqlite_insert
    new = insert(_PRUNED)
    connection.execute(
        new.on_conflict_do_update(index_elements=[_PRUNED.c.channel], set_={
            "deliveries": _PRUNED.c.deliveries + new.excluded.deliveries,
            "duplicates": _PRUNED.c.duplicates + new.excluded.duplicates,
        }),
        [{"channel": channel, "deliveries": count, "duplicates": repeats[channel]}
         for channel, count in counts.items()],
    )
