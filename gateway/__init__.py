"""hitl-gateway web layer: the Flask app, REST API, webhooks, console, CLI and settings; and `gateway.client`, the
Python client of the REST API for agents that run elsewhere.

`create_app` and `Settings` are imported when first used: importing `gateway.client` loads neither Flask nor
SQLAlchemy (an agent's process needs only `requests`)."""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import create_app
    from .settings import Settings

__all__ = ["Settings", "create_app"]
_LAZY = {"create_app": ".app", "Settings": ".settings"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
