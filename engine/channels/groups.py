"""Platform groups: who belongs to a Slack user group or a GitHub team, asked of the channel that knows.

An `approvers(...)` item `slack-usergroup:<id>` or `github-team:<org>/<slug>` names a group kept on a platform.
The engine never imports adapters: a channel adapter that can list a kind of group implements `GroupListing` (and
raises engine.errors.GroupLookupFailed), and `PlatformGroups` (one per Runtime) finds it among the runtime's
channels and asks it. An answer is stored (tables `platform_groups`, `platform_group_members`), so every process
of the gateway judges with it for GROUP_MEMBERS_TTL_SECONDS before a platform is asked again, and the request
lists show the members the requests their group may approve (engine/store/access.py `approver_items`, which counts
the last stored answer however old). A lookup that fails (the channel is not configured, the platform refused, it
is down) raises GroupLookupFailed with a reason a person can read: an approvers policy then refuses (fail closed),
and nothing failed is stored. `look_up_approvers` is the job that looks up an external request's platform groups
once it opened, so their members see it before anyone answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from sqlalchemy import delete, insert, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from engine import defaults
from engine.errors import GroupLookupFailed
from engine.store.db import Database
from engine.store.tables import PlatformGroup, PlatformGroupMember, RequestApprover

if TYPE_CHECKING:
    from engine.jobs.runtime import Runtime

log = logging.getLogger(__name__)

PLATFORM_KINDS = {"slack-usergroup": "slack", "github-team": "github"}
"""Each platform group kind and the channel that lists its members."""


@runtime_checkable
class GroupListing(Protocol):
    """Optional for an adapter: list the members of one of its platform's groups, as principal ids (the ids its
    webhooks record for them: `slack:<team>:<user>`, `github:<user id>`). `kind` is a key of PLATFORM_KINDS, `ref`
    what follows it (`S0614TZR7`, `acme/release-owners`). Any failure raises GroupLookupFailed."""

    def group_members(self, kind: str, ref: str) -> frozenset[str]: ...


def platform_kind(item: str) -> str | None:
    """The platform group kind an approvers item names (`slack-usergroup:S1` -> `slack-usergroup`), else None."""
    kind, sep, _ = item.partition(":")
    return kind if sep and kind in PLATFORM_KINDS else None


class PlatformGroups:
    """The members of platform groups, through the runtime's channel adapters, each stored for every process and
    used for `ttl` seconds (at most GROUP_MEMBERS_TTL_SECONDS) after it was looked up."""

    def __init__(self, channels: Mapping[str, object], db: Database, clock: Callable[[], datetime],
                 ttl: float = defaults.GROUP_MEMBERS_TTL_SECONDS) -> None:
        self.channels = channels
        self.db = db
        self.clock = clock
        self.ttl = timedelta(seconds=min(ttl, defaults.GROUP_MEMBERS_TTL_SECONDS))

    def members(self, item: str) -> frozenset[str]:
        """The principal ids in the group `item` names (`slack-usergroup:S1`); GroupLookupFailed otherwise. One
        read while the stored answer is fresh; else the platform is asked (no transaction is held meanwhile) and
        its answer stored."""
        kind = platform_kind(item)
        if kind is None:
            raise GroupLookupFailed(f"{item} is not a platform group")
        now = self.clock()
        with self.db.read() as db:
            stored = db.execute(
                select(PlatformGroup.fetched_at, PlatformGroupMember.principal_id)
                .outerjoin(PlatformGroupMember, PlatformGroupMember.item == PlatformGroup.item)
                .where(PlatformGroup.item == item)).all()
        if stored and stored[0][0] > now - self.ttl:
            return frozenset(principal_id for _, principal_id in stored if principal_id is not None)
        ref = item.partition(":")[2]
        adapter = self.channels.get(PLATFORM_KINDS[kind])
        if not isinstance(adapter, GroupListing):
            raise GroupLookupFailed(f"the members of {item} cannot be looked up: {PLATFORM_KINDS[kind]} is not "
                                    "configured on this gateway")
        try:
            members = frozenset(adapter.group_members(kind, ref))
        except GroupLookupFailed as exc:
            raise GroupLookupFailed(f"the members of {item} could not be looked up: {exc}") from exc
        self.store(item, members, now)
        return members

    def store(self, item: str, members: frozenset[str], now: datetime) -> None:
        """Replace the stored members of `item`. The group's row is written first: a process storing the same
        group at once waits for this one's commit, then replaces its rows in turn."""
        with self.db.write() as db:
            connection = db.connection()
            upsert: Any = pg_insert if connection.dialect.name == "postgresql" else sqlite_insert
            new = upsert(PlatformGroup).values(item=item, fetched_at=now)
            connection.execute(new.on_conflict_do_update(index_elements=[PlatformGroup.item],
                                                         set_={"fetched_at": new.excluded.fetched_at}))
            connection.execute(delete(PlatformGroupMember).where(PlatformGroupMember.item == item))
            if members:
                connection.execute(insert(PlatformGroupMember),
                                   [{"item": item, "principal_id": member} for member in sorted(members)])


def look_up_approvers(rt: Runtime, request_id: str) -> None:
    """The job an external request naming platform groups as approvers gets when it opens: look each up (unless
    its stored members are fresh), so their members see the request in their lists before anyone answers. A group
    that cannot be looked up is logged and left: judging asks again, and refuses while it fails."""
    with rt.db.read() as db:
        items = [item for item in db.execute(select(RequestApprover.principal_id)
                                             .where(RequestApprover.request_id == request_id)).scalars()
                 if platform_kind(item) is not None]
    for item in items:
        try:
            rt.groups.members(item)
        except GroupLookupFailed as exc:
            log.warning("request %s: %s", request_id, exc)
