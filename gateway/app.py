"""`create_app(settings=None)`: the Flask application factory."""

from __future__ import annotations

from flask import Flask

from engine import defaults
from engine.jobs.executors import InlineExecutor
from engine.jobs.recovery import HandOverPoll, Sweeper
from engine.jobs.runtime import Runtime

from . import api, body_limit, console, errors, github, health, metrics, openapi, people, slack, twilio
from .changes import Changes
from .compose import build_runtime
from .settings import Settings, load_settings


def create_app(settings: Settings | None = None, rt: Runtime | None = None) -> Flask:
    """The app over `rt` (by default built from `settings`, by default from the environment)."""
    settings = settings or load_settings()
    app = Flask(__name__)
    app.json.sort_keys = False  # type: ignore[attr-defined]
    app.config["HITL_SETTINGS"] = settings
    rt = app.extensions["hitl"] = rt or build_runtime(settings)
    if isinstance(rt.executor, InlineExecutor):  # embedded mode: no worker sweeps, so this process does
        app.extensions["hitl-background"] = [
            Sweeper(rt, settings.sweep_seconds).start(),
            HandOverPoll(rt, defaults.HAND_OVER_POLL_SECONDS).start(),  # and it runs what the CLI hands over
        ]
    app.extensions["hitl-changes"] = Changes(rt.db)  # what open event streams wait on (gateway/stream.py)
    errors.init_app(app)
    body_limit.init_app(app)
    app.register_blueprint(api.bp)
    app.register_blueprint(people.bp)
    app.register_blueprint(health.bp)
    app.register_blueprint(openapi.bp)
    app.register_blueprint(metrics.bp)
    app.register_blueprint(console.bp)
    app.register_blueprint(twilio.bp)
    app.register_blueprint(github.bp)
    slack.init_app(app)
    return app
