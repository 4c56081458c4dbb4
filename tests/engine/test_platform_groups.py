"""A platform group's members are stored for every process (engine/channels/groups.py): used for at most
GROUP_MEMBERS_TTL_SECONDS, then asked again and replaced; a failed lookup raises, stores nothing and leaves the last
answer as it was; a group not looked up within the retention is pruned. On SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from sqlalchemy import select

from engine import defaults
from engine.errors import GroupLookupFailed
from engine.jobs.executors import InlineExecutor
from engine.jobs.runtime import Runtime
from engine.store.db import Database
from engine.store.retention import prune
from engine.store.tables import PlatformGroup, PlatformGroupMember
from tests.engine.test_retention import DAY, Clock, db  # noqa: F401 - the fixture
from tests.support.agent import agent as test_agent

GROUP = "slack-usergroup:S1"
TTL = timedelta(seconds=defaults.GROUP_MEMBERS_TTL_SECONDS)


class Listing:
    """A channel that lists a group's members: `members`, or GroupLookupFailed while `failing`; counts its calls."""

    def __init__(self, members: set[str]) -> None:
        self.members, self.failing, self.calls = members, False, 0

    def group_members(self, kind: str, ref: str) -> frozenset[str]:
        self.calls += 1
        if self.failing:
            raise GroupLookupFailed("Slack is down")
        return frozenset(self.members)


@pytest.fixture
def runtimes(db: Database) -> Iterator[tuple[Runtime, Runtime, Listing, Clock]]:  # noqa: F811 - the fixture
    """Two runtimes (two processes' worth) on one database, one Slack, one clock."""
    listing = Listing({"slack:T1:U1", "slack:T1:U2"})
    clock = Clock(Runtime(db, test_agent, InlineExecutor(1)).now())
    made = [Runtime(db, test_agent, InlineExecutor(1), clock=clock, channels={"slack": listing})  # type: ignore[dict-item]
            for _ in range(2)]
    yield made[0], made[1], listing, clock
    for rt in made:
        rt.executor.shutdown()  # type: ignore[attr-defined]


def stored(rt: Runtime) -> list[tuple[str, str]]:
    with rt.db.read() as session:
        return [(item, member) for item, member in session.execute(
            select(PlatformGroupMember.item, PlatformGroupMember.principal_id).order_by(PlatformGroupMember.item,
                                                                                   PlatformGroupMember.principal_id))]


def test_a_lookup_serves_every_process_until_it_is_stale_then_is_replaced(
        runtimes: tuple[Runtime, Runtime, Listing, Clock]) -> None:
    one, other, listing, clock = runtimes
    assert one.groups.members(GROUP) == {"slack:T1:U1", "slack:T1:U2"}
    clock.now += TTL - timedelta(seconds=1)
    assert other.groups.members(GROUP) == {"slack:T1:U1", "slack:T1:U2"}
    assert listing.calls == 1

    listing.members = {"slack:T1:U2", "slack:T1:U3"}
    clock.now += timedelta(seconds=2)

    assert other.groups.members(GROUP) == {"slack:T1:U2", "slack:T1:U3"}
    assert one.groups.members(GROUP) == {"slack:T1:U2", "slack:T1:U3"}
    assert listing.calls == 2
    assert stored(one) == [(GROUP, "slack:T1:U2"), (GROUP, "slack:T1:U3")]


def test_a_failed_lookup_refuses_and_leaves_the_last_answer_stored(
        runtimes: tuple[Runtime, Runtime, Listing, Clock]) -> None:
    one, other, listing, clock = runtimes
    one.groups.members(GROUP)
    listing.failing = True
    clock.now += TTL + timedelta(seconds=1)

    for rt in (one, other):
        with pytest.raises(GroupLookupFailed, match="the members of slack-usergroup:S1 could not be looked up"):
            rt.groups.members(GROUP)

    assert listing.calls == 3  # a failure is not kept: each judging asks again
    assert stored(one) == [(GROUP, "slack:T1:U1"), (GROUP, "slack:T1:U2")]
    with one.db.read() as session:
        assert session.execute(select(PlatformGroup.fetched_at)).scalar_one() < clock.now - TTL


def test_an_empty_group_is_an_answer_kept_like_any_other(runtimes: tuple[Runtime, Runtime, Listing, Clock]) -> None:
    one, other, listing, _ = runtimes
    listing.members = set()
    assert one.groups.members(GROUP) == frozenset()
    assert other.groups.members(GROUP) == frozenset()
    assert listing.calls == 1


def test_a_group_not_looked_up_within_the_retention_is_pruned(
        runtimes: tuple[Runtime, Runtime, Listing, Clock]) -> None:
    one, _, _, clock = runtimes
    one.groups.members(GROUP)
    clock.now += DAY * (one.retention_days - 1)
    one.groups.members("slack-usergroup:S2")
    prune(one)
    assert {item for item, _ in stored(one)} == {GROUP, "slack-usergroup:S2"}

    clock.now += DAY * 2
    prune(one)

    assert {item for item, _ in stored(one)} == {"slack-usergroup:S2"}
    with one.db.read() as session:
        assert session.execute(select(PlatformGroup.item)).scalars().all() == ["slack-usergroup:S2"]
