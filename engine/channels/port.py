"""What a channel adapter may ask of the engine: the runtime's channel-facing side, on one object.

Adapters import only the engine's channel-facing modules (tests/test_import_boundaries.py lists them): they never
see the Runtime, its database or its tables. The gateway hands an adapter a `ChannelPort` on the runtime as an
argument: with each webhook (`receive(port, request)`), and once, when the runtime is built, to an adapter that
reads the engine's state while it posts (`Attaching`: Twilio asks whether a number opted out).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from engine.answers.checks import edit_problems
from engine.answers.edits import Problem
from engine.answers.input_requests import request_out
from engine.channels.contacts import is_reachable, set_reachable
from engine.channels.contract import InboundItem
from engine.channels.delivery import shown_requests
from engine.channels.inbound import accept
from engine.jobs.runtime import Runtime
from engine.protocol import InputRequestOut, Principal
from engine.store.queries import list_requests
from engine.store.statuses import RequestStatus
from engine.store.tables import InputRequest
from engine.turns.sessions import latest_session_at


class ChannelPort:
    """The engine as one channel's adapter uses it, on the runtime `rt`."""

    def __init__(self, rt: Runtime, channel: str) -> None:
        self._rt, self.channel = rt, channel

    def accept(self, external_id: str, principal: Principal | None, payload: bytes, item: InboundItem | None) -> bool:
        """Store a verified delivery once, under its platform id (engine.channels.inbound.accept): False for a
        duplicate, which changes nothing. `item` None: kept for the audit trail only."""
        return accept(self._rt, self.channel, external_id, principal, payload, item)

    def shown_requests(self, address: str, limit: int = 100) -> list[tuple[str, InputRequestOut]]:
        """The requests this channel posted at `address`, newest first, each with its post's reference."""
        return shown_requests(self._rt, self.channel, address, limit)

    def find_request(self, request_id: str) -> InputRequestOut | None:
        """The request `request_id` as it stands now (None: no such request)."""
        with self._rt.db.read() as db:
            row = db.get(InputRequest, request_id)
            return request_out(row) if row is not None else None

    def has_session(self, address: str) -> bool:
        """Whether a session of this channel lives at `address`."""
        with self._rt.db.read() as db:
            return latest_session_at(db, self.channel, address) is not None

    def has_pending(self, session_id: str) -> bool:
        """Whether the session `session_id` has an open request."""
        return bool(list_requests(self._rt, status=RequestStatus.PENDING, session_id=session_id, limit=1)["requests"])

    def edit_problems(self, request_id: str, data: dict[str, Any]) -> list[Problem]:
        """What is wrong with approving request `request_id` with input `data` (nothing: [])."""
        return edit_problems(self._rt, request_id, data)

    def is_reachable(self, address: str) -> bool:
        """False once `address` was marked unreachable on this channel (e.g. the number texted STOP)."""
        return is_reachable(self._rt, self.channel, address)

    def set_reachable(self, address: str, reachable: bool) -> None:
        """Record whether this channel may post to `address` (reachable again: the open prompts are re-shown)."""
        set_reachable(self._rt, self.channel, address, reachable)


@runtime_checkable
class Attaching(Protocol):
    """Optional for an adapter that reads or writes the engine's state outside a webhook, as it posts: it is
    handed its port once, by `attach_channels`, when the runtime is built."""

    name: str

    def attach(self, port: ChannelPort) -> None: ...


def attach_channels(rt: Runtime) -> Runtime:
    """Hand each `Attaching` adapter of `rt` its port; returns `rt`."""
    for adapter in rt.channels.values():
        if isinstance(adapter, Attaching):
            adapter.attach(ChannelPort(rt, adapter.name))
    return rt
