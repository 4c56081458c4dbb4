"""Platform groups: who belongs to a Slack user group or a GitHub team, asked of the channel that knows.

An `approvers(...)` item `slack-usergroup:<id>` or `github-team:<org>/<slug>` names a group kept on a platform.
The engine never imports adapters: a channel adapter that can list a kind of group implements `GroupListing` (and
raises engine.errors.GroupLookupFailed),
and `PlatformGroups` (one per Runtime, so per process) finds it among the runtime's channels, asks it, and keeps
the answer at most GROUP_MEMBERS_TTL_SECONDS. A lookup that fails (the channel is not configured, the platform
refused, it is down) raises GroupLookupFailed with a reason a person can read: an approvers policy then refuses
(fail closed), and nothing failed is kept.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Protocol, runtime_checkable

from engine import defaults
from engine.errors import GroupLookupFailed

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
    """The members of platform groups, through the runtime's channel adapters, each kept for `ttl` seconds."""

    def __init__(self, channels: Mapping[str, object], ttl: float = defaults.GROUP_MEMBERS_TTL_SECONDS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.channels = channels
        self.ttl = min(ttl, defaults.GROUP_MEMBERS_TTL_SECONDS)
        self.clock = clock
        self._kept: dict[str, tuple[frozenset[str], float]] = {}
        self._lock = threading.Lock()

    def members(self, item: str) -> frozenset[str]:
        """The principal ids in the group `item` names (`slack-usergroup:S1`); GroupLookupFailed otherwise."""
        kind = platform_kind(item)
        if kind is None:
            raise GroupLookupFailed(f"{item} is not a platform group")
        now = self.clock()
        with self._lock:
            kept = self._kept.get(item)
        if kept is not None and kept[1] > now:
            return kept[0]
        ref = item.partition(":")[2]
        adapter = self.channels.get(PLATFORM_KINDS[kind])
        if not isinstance(adapter, GroupListing):
            raise GroupLookupFailed(f"the members of {item} cannot be looked up: {PLATFORM_KINDS[kind]} is not "
                                    "configured on this gateway")
        try:
            members = frozenset(adapter.group_members(kind, ref))
        except GroupLookupFailed as exc:
            raise GroupLookupFailed(f"the members of {item} could not be looked up: {exc}") from exc
        with self._lock:
            self._kept[item] = (members, now + self.ttl)
        return members
