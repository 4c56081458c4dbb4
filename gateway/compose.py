"""The composition root: settings in, a wired Runtime out (web processes and workers alike)."""

from __future__ import annotations

import importlib
import logging
import os
import sys
from collections.abc import Callable

from sqlalchemy.exc import DBAPIError

from engine import Agent
from engine.channels.contract import ChannelAdapter
from engine.channels.port import attach_channels
from engine.jobs.executors import InlineExecutor, RQExecutor
from engine.jobs.runtime import Executor, Runtime, install
from engine.store.db import Database

from .github import github_channel
from .settings import ConfigurationError, Settings
from .slack import slack_channel
from .twilio import twilio_channel

log = logging.getLogger(__name__)


def load_agent(spec: str, named: str | None = None) -> Agent:
    """`HITL_AGENT=package.module:attribute`, found on the path or in the working directory (the project's own
    code, as gunicorn finds it: the `hitl` console script's path holds only its own directory). Errors name the
    spec as `named` says (by default `HITL_AGENT=<spec>`)."""
    named = named or f"HITL_AGENT={spec}"
    module_name, sep, attribute = spec.partition(":")
    if not sep or not module_name or not attribute:
        raise ConfigurationError(f"{named}: an agent is named as package.module:attribute")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())
    try:
        agent = getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError) as exc:
        raise ConfigurationError(f"{named}: {exc}") from exc
    if not isinstance(agent, Agent):
        raise ConfigurationError(f"{named} is a {type(agent).__name__}, not an engine.Agent")
    return agent


def open_database(settings: Settings, *, strict: bool = False) -> Database:
    """The database of DATABASE_URL: SQLite migrated here (embedded mode: an empty file gets its tables on first
    start), PostgreSQL checked for migrations this version lacks. A PostgreSQL out of reach is a logged warning,
    as /healthz and the retries of a web process expect, or with `strict` (the CLI) the OperationalError."""
    db = Database(settings.database_url)
    if db.is_sqlite:
        db.upgrade()
        return db
    try:  # migrating a shared database is a release step of its own (the Procfile's `release`)
        missing = db.missing_migrations()
    except DBAPIError as exc:
        if strict:
            raise
        log.warning("could not check the database's migrations: %s", exc.orig)
        missing = []
    if missing:
        raise ConfigurationError(
            f"the database at DATABASE_URL lacks {len(missing)} migration(s) of this version (up to "
            f"{missing[0]}): run `hitl db upgrade` first (the Procfile's release command)")
    return db


def queue(settings: Settings) -> RQExecutor | None:
    """The RQ queue of REDIS_URL, when set."""
    return RQExecutor(settings.redis_url, settings.queue, settings.job_timeout) if settings.redis_url else None


def build_runtime(settings: Settings, *, db: Database | None = None, agent_spec: str | None = None,
                  executor: Executor | None = None) -> Runtime:
    """Database, agent (HITL_AGENT's, unless `agent_spec` names another) and executor (RQ with REDIS_URL, else
    in-process) from settings; installed as this process's runtime for jobs, its channels attached to it."""
    spec = agent_spec or settings.agent
    agent = load_agent(spec) if agent_spec is None else load_agent(spec, f"agent {spec}")
    return install(attach_channels(Runtime(
        db or open_database(settings), agent, executor or queue(settings) or InlineExecutor(settings.inline_workers),
        lease_seconds=settings.lease_seconds, response_policy_timeout=settings.response_policy_timeout,
        request_policy_timeout=settings.request_policy_timeout, retention_days=settings.retention_days,
        channels=build_channels(settings), agent_spec=spec, callback_key=settings.callback_key,
        callback_hosts=frozenset(settings.callback_allowed_hosts),
    )))


CHANNEL_FACTORIES: list[Callable[[Settings], ChannelAdapter | None]] = []
"""One per channel module of the gateway: settings in, the configured adapter (or None when not configured)."""
CHANNEL_FACTORIES.append(twilio_channel)
CHANNEL_FACTORIES.append(github_channel)
CHANNEL_FACTORIES.append(slack_channel)


def build_channels(settings: Settings) -> dict[str, ChannelAdapter]:
    """Every configured channel adapter by name; a half-configured channel fails here, naming what is missing."""
    adapters = (factory(settings) for factory in CHANNEL_FACTORIES)
    return {adapter.name: adapter for adapter in adapters if adapter is not None}
