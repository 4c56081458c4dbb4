"""What happens to a request while nobody answers it (DESIGN.md section 10, "Time"): reminders, escalation, and
what its expiry means. A `Schedule` is only the plan; engine/answers/timers.py stores it as rows with a due time
when the request opens, and the sweep carries it out."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, cast

from engine import defaults

OnTimeout = Literal["deny", "approve", "dismiss"]
Seconds = float | timedelta

ON_TIMEOUT: dict[str, tuple[OnTimeout, ...]] = {"tool-approval": ("deny", "approve"), "question": ("dismiss",)}
"""What expiry may mean, by request kind (the first: what it means when nothing says)."""


@dataclass(frozen=True)
class Place:
    """Where an escalated request is also shown: a configured channel and an address as that channel's adapter
    takes it (as POST /api/sessions' `{channel, address}`: Twilio `{"to": "+1555..."}`, Slack `{"channel": "C..."}`,
    GitHub `{"repo": "owner/name", "issue": 7}`)."""

    channel: str
    address: Mapping[str, Any]

    def wire(self) -> dict[str, Any]:
        return {"channel": self.channel, "address": dict(self.address)}


@dataclass(frozen=True)
class Schedule:
    """A request's reminders (`remind_every` seconds apart, at most `remind_max`), its escalation (after
    `escalate_after` seconds it is also shown at `escalate_to`, and `escalate_approvers` may settle it too), and
    what its expiry means (`on_timeout`; None: `deny` for an approval, `dismiss` for a question)."""

    remind_every: float | None = None
    remind_max: int = defaults.REMIND_MAX
    escalate_after: float | None = None
    escalate_to: tuple[Place, ...] = ()
    escalate_approvers: tuple[str, ...] = ()
    on_timeout: OnTimeout | None = None

    @property
    def timed(self) -> bool:
        """Whether anything falls due before the request closes (a reminder or an escalation)."""
        return self.remind_every is not None or self.escalate_after is not None


NO_SCHEDULE = Schedule()


def schedule(kind: str, *, remind_every: Seconds | None = None, remind_max: int | None = None,
             escalate_after: Seconds | None = None, escalate_to: Any = None,
             escalate_approvers: Sequence[str] | None = None, on_timeout: str | None = None) -> Schedule:
    """A checked Schedule for a request of `kind` (`tool-approval` or `question`); ValueError naming what is
    wrong."""
    if remind_max is not None and remind_every is None:
        raise ValueError("remind_max needs remind_every")
    if remind_max is not None and (isinstance(remind_max, bool) or not isinstance(remind_max, int) or remind_max < 1):
        raise ValueError(f"remind_max must be a whole number of at least 1, not {remind_max!r}")
    places = places_of(escalate_to)
    approvers = approvers_of(escalate_approvers)
    if escalate_after is None and (places or approvers):
        raise ValueError("escalate_to and escalate_approvers need escalate_after")
    if escalate_after is not None and not (places or approvers):
        raise ValueError("escalate_after needs escalate_to (places) or escalate_approvers (principal ids), or both")
    allowed = ON_TIMEOUT.get(kind, ())
    if on_timeout is not None and on_timeout not in allowed:
        raise ValueError(f"on_timeout of a {kind} request is one of {', '.join(allowed) or 'nothing'}, "
                         f"not {on_timeout!r}")
    return Schedule(
        remind_every=seconds(remind_every, "remind_every"), remind_max=remind_max or defaults.REMIND_MAX,
        escalate_after=seconds(escalate_after, "escalate_after"), escalate_to=places, escalate_approvers=approvers,
        on_timeout=cast(OnTimeout | None, on_timeout),
    )


def seconds(value: Seconds | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | timedelta):
        raise ValueError(f"{name} is a number of seconds or a timedelta, not {value!r}")
    amount = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not amount > 0:
        raise ValueError(f"{name} must be positive")
    return amount


def places_of(value: Any) -> tuple[Place, ...]:
    """`{"channel": ..., "address": {...}}`, or a list of them."""
    if value is None:
        return ()
    items = [value] if isinstance(value, Mapping) else value
    if not isinstance(items, Sequence) or isinstance(items, str):
        raise ValueError('escalate_to is a place {"channel": ..., "address": {...}} or a list of places')
    return tuple(place_of(item) for item in items)


def place_of(item: Any, also: str = "") -> Place:
    """`{"channel": ..., "address": {...}}` as a Place; ValueError saying what a place is (`also`: the other
    kinds of place where more are taken)."""
    if not isinstance(item, Mapping) or set(item) != {"channel", "address"} \
            or not isinstance(item["channel"], str) or not item["channel"] \
            or not isinstance(item["address"], Mapping):
        raise ValueError(f'a place is {also}{{"channel": "<a configured channel>", "address": {{...}}}}, '
                         f'not {item!r}')
    return Place(item["channel"], dict(item["address"]))


def approvers_of(value: Sequence[str] | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError("escalate_approvers is a list of principal ids, like [\"twilio:+15551230002\"]")
    return tuple(dict.fromkeys(v.strip() for v in value))
