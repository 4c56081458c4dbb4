"""The channel contract (DESIGN.md section 7): what a scenario may do through any channel.

A driver is how a person uses one channel: start a session, see what is shown, press an option, type a
reply, and read what a refused responder was told. Each channel's driver lives beside this file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from tests.conftest import Stack


@dataclass
class Shown:
    """One request as a person sees it in the channel."""

    request_id: str
    text: str
    choices: list[str]  # the labels a person can pick (buttons, menu entries, numbered lines)
    open: bool  # controls still there (or, for a text channel, still the prompt being answered)
    extra: dict = field(default_factory=dict)


class Driver(Protocol):
    name: str
    stack: Stack

    def open(self, message: str, who: str) -> str:
        """`who` starts a session with `message` through the channel; returns the session id."""
        ...

    def shown(self, session_id: str) -> list[Shown]:
        """Every request the channel has shown for the session, in order, as it looks now."""
        ...

    def press(self, session_id: str, request_id: str, option_id: str, who: str) -> None:
        """`who` picks an option of a shown request (a button, a menu entry, or its number typed back)."""
        ...

    def type(self, session_id: str, text: str, who: str) -> None:
        """`who` writes a message to the session."""
        ...

    def told(self, session_id: str, who: str) -> list[str]:
        """What the channel told `who` privately or in reply (refusals)."""
        ...


class TextDriver(Driver, Protocol):
    """A channel that shows one request at a time, in order, as text (SMS, GitHub comments)."""

    def ask(self, message: str, who: str) -> str:
        """`who`'s app starts a session through the API (`POST /api/sessions` with the channel and an address of
        `who`'s) whose requests the channel shows; returns the session id."""
        ...

    def said(self, session_id: str) -> list[str]:
        """Everything the gateway posted for the session, in order, each as it reads now."""
        ...
