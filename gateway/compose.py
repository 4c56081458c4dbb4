"""The composition root: settings in, a wired Runtime out (web processes and workers alike)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError

from engine import Agent
from engine.channels import ChannelAdapter
from engine.db import Database
from engine.executors import InlineExecutor, RQExecutor
from engine.runtime import Executor, Runtime, install

from .github import github_channel
from .settings import ConfigurationError, Settings
from .slack import slack_channel
from .twilio import twilio_channel

log = logging.getLogger(__name__)


def load_agent(spec: str) -> Agent:
    """`HITL_AGENT=package.module:attribute`, found on the path or in the working directory (the project's own
    code, as gunicorn finds it: the `hitl` console script's path holds only its own directory)."""
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"HITL_AGENT must look like package.module:attribute, not {spec!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        agent = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"HITL_AGENT={spec}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"HITL_AGENT={spec} is a {type(agent).__name__}, not an engine.Agent")
    return agent


def build_runtime(settings: Settings) -> Runtime:
    """Database, agent and executor from settings; installed as this process's runtime for jobs."""
    db = Database(settings.database_url)
    if db.is_sqlite:
        db.upgrade()  # embedded mode: an empty SQLite file gets its tables on first start
    else:  # migrating a shared database is a release step of its own (the Procfile's `release`)
        try:
            missing = db.missing_migrations()
        except DBAPIError as exc:  # down for now: start anyway, as /healthz and the retries expect
            log.warning("could not check the database's migrations: %s", exc.orig)
            missing = []
        if missing:
            raise ConfigurationError(
                f"the database at DATABASE_URL lacks {len(missing)} migration(s) of this version (up to "
                f"{missing[0]}): run `hitl db upgrade` first (the Procfile's release command)")
    executor: Executor = (
        RQExecutor(settings.redis_url, settings.queue, settings.job_timeout) if settings.redis_url
        else InlineExecutor(settings.inline_workers)
    )
    return install(Runtime(
        db, load_agent(settings.agent), executor, lease_seconds=settings.lease_seconds,
        response_policy_timeout=settings.response_policy_timeout,
        request_policy_timeout=settings.request_policy_timeout, retention_days=settings.retention_days,
        channels=build_channels(settings), callback_key=settings.callback_key,
        callback_hosts=frozenset(settings.callback_allowed_hosts),
    ))


CHANNEL_FACTORIES: list[Callable[[Settings], ChannelAdapter | None]] = []
"""One per channel module of the gateway: settings in, the configured adapter (or None when not configured)."""
CHANNEL_FACTORIES.append(twilio_channel)
CHANNEL_FACTORIES.append(github_channel)
CHANNEL_FACTORIES.append(slack_channel)


def build_channels(settings: Settings) -> dict[str, ChannelAdapter]:
    """Every configured channel adapter by name; a half-configured channel fails here, naming what is missing."""
    adapters = (factory(settings) for factory in CHANNEL_FACTORIES)
    return {adapter.name: adapter for adapter in adapters if adapter is not None}
