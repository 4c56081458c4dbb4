"""A channel adapter that records what it was asked to post: the engine's delivery tests use it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.channels.contract import QueuePosition, Reminder
from engine.policies import SessionInfo
from engine.protocol import InputRequestOut, Principal


@dataclass
class RecordingChannel:
    name: str = "fake"
    one_at_a_time: bool = False
    update_edits: bool = False
    calls: list[tuple] = field(default_factory=list)
    refused_at: list[tuple[str, str]] = field(default_factory=list)  # (session address, responder) of each refusal
    down: bool = False

    def address(self, data: dict[str, Any]) -> str:
        if not isinstance(data.get("room"), str):
            raise ValueError("a fake address needs a room")
        return f"fake:{data['room']}:"

    def show(self, session: SessionInfo, request: InputRequestOut, position: QueuePosition) -> str:
        self._maybe_fail()
        self.calls.append(("show", request.request_id, position.index, position.total))
        return f"ref-{len(self.calls)}"

    def update(self, session: SessionInfo, request: InputRequestOut, ref: str | None) -> None:
        self.calls.append(("update", request.request_id, request.outcome, ref))

    def say(self, session: SessionInfo, text: str) -> str:
        self.calls.append(("say", text))
        return f"ref-{len(self.calls)}"

    def refuse(self, session: SessionInfo, request: InputRequestOut, responder: Principal, reason: str) -> None:
        self.calls.append(("refuse", request.request_id, responder.principal_id, reason))
        self.refused_at.append((session.address, responder.principal_id))

    def remind(self, session: SessionInfo, request: InputRequestOut, ref: str, reminder: Reminder) -> str:
        self._maybe_fail()
        self.calls.append(("remind", request.request_id, reminder.count, ref))
        return f"ref-{len(self.calls)}"

    def refresh(self, session: SessionInfo, request: InputRequestOut, ref: str) -> None:
        self.calls.append(("refresh", request.request_id, request.escalated_at is not None, ref))

    def _maybe_fail(self) -> None:
        if self.down:
            raise RuntimeError("the platform is down")
