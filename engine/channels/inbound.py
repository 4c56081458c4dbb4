"""Inbound items from channels: verified, deduplicated by platform id, stored, then applied by a job.

A webhook handler calls `accept()` (one transaction: the Inbound row, unique on (channel, external id),
and a `process_inbound` job); the job turns the stored item into responses or a message. `accept()` is where
every channel's text enters the engine: what a database cannot store is removed there, once (`storable`).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import re
from collections.abc import Mapping
from typing import Any, cast

from sqlalchemy import Table, bindparam, delete, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import Session as DbSession

from engine.answers.conversation import post_message, receive_responses
from engine.answers.submit import ResponseResult
from engine.channels.contract import (
    Acknowledging,
    Answers,
    ChannelAdapter,
    Choice,
    Ignored,
    InboundItem,
    Message,
    Noticing,
    read_item,
    stored_item,
)
from engine.errors import AlreadyApplied
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, Principal
from engine.store.db import changed
from engine.store.tables import Inbound, InputRequest
from engine.turns.sessions import latest_session_at, session_at

log = logging.getLogger(__name__)

_MARK_PROCESSED = update(Inbound).where(Inbound.id == bindparam("inbound"), Inbound.processed_at.is_(None)) \
    .values(processed_at=bindparam("now"))
"""An item's compare-and-set, built once (see turns/transitions.py)."""
_INBOUND = cast(Table, Inbound.__table__)
_INSERT_ONCE = {dialect: insert(_INBOUND).on_conflict_do_nothing(index_elements=["channel", "external_id"])
                .returning(_INBOUND.c.id) for dialect, insert in (("postgresql", pg_insert), ("sqlite", sqlite_insert))}
"""A delivery's row unless its platform id is stored already, per dialect (its values are the parameters; on
the table, run on the connection: no ORM work)."""


UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
"""Characters no database here can store: NUL (PostgreSQL's text cannot hold it) and lone surrogates (JSON's
`\\ud800` reads as one; UTF-8 cannot encode it)."""
EXTERNAL_ID_LENGTH = 200
"""The `inbound.external_id` column's length; a longer platform id is stored as its digest."""


def storable(value: Any) -> Any:
    """`value` with UNSTORABLE characters removed from every string in it, keys included (the rest is kept: a
    message with a NUL in it arrives without the NUL, never lost to a database error)."""
    if isinstance(value, str):
        return UNSTORABLE.sub("", value)
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    if isinstance(value, list):
        return [storable(item) for item in value]
    return value


def storable_id(external_id: str) -> str:
    cleaned = storable(external_id)
    if len(cleaned) <= EXTERNAL_ID_LENGTH:
        return str(cleaned)
    return "sha256:" + hashlib.sha256(cleaned.encode()).hexdigest()


def accept(rt: Runtime, channel: str, external_id: str, principal: Principal | None, payload: bytes,
           item: InboundItem | None) -> bool:
    """Record a delivery once; False for a duplicate (nothing changes). `item` None: audit only. The id, the
    principal and the item (as `stored_item` writes it) are stored `storable`."""
    external_id = storable_id(external_id)
    with rt.transaction() as db:
        stored = stored_item(item) if item is not None else None
        inbound_id = insert_once(db, channel, external_id, principal, payload, stored, rt)
        if inbound_id is None:  # counted, for the metrics, and otherwise ignored
            db.execute(update(Inbound).where(Inbound.channel == channel, Inbound.external_id == external_id)
                       .values(duplicates=Inbound.duplicates + 1))
            return False
        if item is not None:
            rt.enqueue(db, "process_inbound", inbound_id)
        return True


def insert_once(db: DbSession, channel: str, external_id: str, principal: Principal | None, payload: bytes,
                item: dict[str, Any] | None, rt: Runtime) -> int | None:
    connection = db.connection()
    return connection.execute(_INSERT_ONCE[connection.dialect.name], {
        "channel": channel, "external_id": external_id, "received_at": rt.now(),
        "principal": storable(principal.wire()) if principal else None,
        "payload_digest": hashlib.sha256(payload).hexdigest(), "item": storable(item),
    }).scalar_one_or_none()


def process_inbound(rt: Runtime, inbound_id: int) -> None:
    """Job body: apply a stored item once; running it again changes nothing.

    A message is marked processed in the same transaction that posts it, and so are responses the default
    policy settles where they are stored; responses judged by another policy are applied first and marked
    after (a second application finds the requests closed and ignores the repeat). A channel that
    acknowledges messages hears `received`, then what became of each response the item made; for an item kept
    but ignored it hears `ignored`, and the item's notice, if any, goes to the channel once.
    """
    with rt.db.read() as db:
        row = db.get_one(Inbound, inbound_id)
        if row.processed_at is not None:
            return
        item, channel = read_item(row.item), row.channel
        principal = Principal.model_validate(row.principal) if row.principal else None
        if isinstance(item, Choice):
            item = chosen(db, item)
    adapter, ref = rt.channels.get(channel), item.ref if item is not None else None
    acknowledge(adapter, ref, "ignored" if isinstance(item, Ignored) else "received")
    results: list[ResponseResult] = []

    def claim(db: DbSession) -> bool:
        return mark_processed(rt, db, inbound_id)

    if isinstance(item, Message):
        session_id = session_for_address(rt, channel, item.address, principal)
        with contextlib.suppress(AlreadyApplied):
            results = post_message(rt, session_id, principal, item.text, claim=claim).results
    elif isinstance(item, Answers) and principal is not None and item.responses:
        with contextlib.suppress(AlreadyApplied):
            results = receive_responses(rt, principal, list(item.responses), claim)
    else:  # kept for the audit trail only
        notice, once = (item.notice, item.once) if isinstance(item, Ignored) else (None, None)
        with rt.transaction() as db:
            tell = claim(db) and notice is not None and once is not None and first_notice(rt, db, channel, once)
        if tell and notice is not None and not notify(adapter, notice):  # not given: the next such item tries again
            with rt.transaction() as db:
                db.execute(delete(Inbound).where(Inbound.channel == channel,
                                                 Inbound.external_id == notice_id(str(once))))
    for status in dict.fromkeys(result.status for result in results):
        acknowledge(adapter, ref, status)


def chosen(db: DbSession, item: Choice) -> Answers | None:
    """A choice as the responses it stands for; a choice of no known request or option is kept for the audit
    trail only (None: applying it does nothing)."""
    request = db.get(InputRequest, item.request_id)
    options = request.options if request is not None else []
    if not 1 <= item.position <= len(options):
        log.info("inbound choice %s of request %s: no such request or option", item.position, item.request_id)
        return None
    return Answers((InputResponse(request_id=item.request_id, option_id=options[item.position - 1]["id"]),))


def acknowledge(adapter: ChannelAdapter | None, ref: str | None, status: str) -> None:
    """Side effects that must not fail the job (the item was applied) are logged, never raised."""
    if ref is None or not isinstance(adapter, Acknowledging):
        return
    try:
        adapter.acknowledge(ref, status)
    except Exception:
        log.warning("could not acknowledge %s as %s", ref, status, exc_info=True)


NOTICE = "notice:"
"""The external id prefix of a notice's audit row (not a delivery: the metrics leave them out)."""


def first_notice(rt: Runtime, db: DbSession, channel: str, once: str) -> bool:
    """Whether no item before carried the notice named `once`: recorded as an audit row of its own, whose unique
    (channel, external id) makes the first one win, however many items race."""
    return insert_once(db, channel, notice_id(once), None, once.encode(), None, rt) is not None


def notice_id(once: str) -> str:
    return NOTICE + hashlib.sha256(once.encode()).hexdigest()


def notify(adapter: ChannelAdapter | None, notice: Mapping[str, Any]) -> bool:
    """Whether the notice was given; a failure is logged, never raised (the item is processed, and a notice is
    not worth a retry of its job)."""
    if not isinstance(adapter, Noticing):
        return True
    try:
        adapter.notify(notice)
    except Exception:
        log.warning("could not give the notice %s; the next ignored item of its kind tries again", notice,
                    exc_info=True)
        return False
    return True


def mark_processed(rt: Runtime, db: DbSession, inbound_id: int) -> bool:
    """Compare-and-set: True for the one transaction that marks the item processed."""
    return changed(db.connection(), _MARK_PROCESSED, {"inbound": inbound_id, "now": rt.now()}) == 1


def session_for_address(rt: Runtime, channel: str, address: str, principal: Principal | None) -> str:
    """The latest session at a channel address, or a new one there (looked for again where it is opened: an
    external request or an escalation may have opened one meanwhile)."""
    with rt.db.read() as db:
        found = latest_session_at(db, channel, address)
    if found is not None:
        return found
    with rt.transaction() as db:
        return session_at(rt, db, channel, address, principal)
