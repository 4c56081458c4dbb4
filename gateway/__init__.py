"""hitl-gateway web layer: the Flask app, REST API, webhooks, console, CLI and settings."""

from .app import create_app
from .settings import Settings

__all__ = ["Settings", "create_app"]
