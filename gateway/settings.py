"""All configuration, from the environment and a `.env` file (one pydantic-settings class; `.env.example` lists
every variable, docs/configuration.md's tables describe them)."""

from __future__ import annotations

import os
import re
from typing import Annotated, Any
from urllib.parse import urlsplit

from pydantic import Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

from adapters.github import MIN_PERMISSIONS
from engine.jobs.webhooks import parse_secret

from .apikeys import ApiKey, api_key, check_distinct, parse_key_file, parse_keys

DATABASES = ("sqlite://", "postgres://", "postgresql://", "postgresql+psycopg://")
"""What DATABASE_URL may start with: SQLite (embedded) or PostgreSQL (through psycopg 3)."""
REDISES = ("redis://", "rediss://", "unix://")
"""What REDIS_URL may start with (what redis-py's from_url takes)."""
SLACK_TEAM = re.compile(r"^[TE][A-Z0-9]+$")


class ConfigurationError(Exception):
    """A setting is missing or wrong; raised at start-up, never at the first request."""


def load_settings() -> Settings:
    """This process's settings, from its environment and `.env` in the working directory (the environment wins).
    Bad values are one ConfigurationError naming each variable and what is wrong with it (not the value: some
    are secrets)."""
    try:
        return Settings()
    except ValidationError as exc:
        problems = "; ".join(": ".join(filter(None, (".".join(str(part) for part in error["loc"]), problem(error))))
                             for error in exc.errors(include_url=False))
        raise ConfigurationError(f"bad settings: {problems}") from None


def problem(error: Any) -> str:
    """What is wrong with a value: a validator's own words (pydantic prefixes them "Value error, "), else pydantic's."""
    raised = error.get("ctx", {}).get("error") if error["type"] == "value_error" else None
    return str(raised) if raised is not None else str(error["msg"])


def half_configured(channel: str, required: dict[str, str | None], *, also_given: dict[str, str | None] | None = None,
                    hint: str = "") -> ConfigurationError:
    """The one wording of a channel configured in part, naming every variable given and every one missing:
    `Twilio is half configured: TWILIO_ACCOUNT_SID is set but TWILIO_FROM and PUBLIC_BASE_URL are missing`."""
    given = [name for name, value in {**required, **(also_given or {})}.items() if value]
    missing = [name for name, value in required.items() if not value]
    return ConfigurationError(f"{channel} is half configured: {names(given)} {'is' if len(given) == 1 else 'are'} "
                              f"set but {names(missing)} {'is' if len(missing) == 1 else 'are'} missing{hint}")


def names(variables: list[str]) -> str:
    return " and ".join(variables) if len(variables) < 3 else f"{', '.join(variables[:-1])} and {variables[-1]}"


def shown_database(url: str) -> str:
    """DATABASE_URL as a person should see it: the password hidden, a SQLite file as an absolute path."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database in (None, "", ":memory:"):
            return "sqlite:// (in memory)"
        return f"sqlite:///{os.path.abspath(parsed.database)}"
    return parsed.render_as_string(hide_password=True)


def shown_redis(url: str) -> str:
    """REDIS_URL with its password hidden."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


def described(settings: Settings) -> dict[str, str]:
    """Which database, agent and job mode this process uses, as a person should read them (`hitl --help`)."""
    jobs = (f"on the RQ queue {settings.queue} at {shown_redis(settings.redis_url)} (run `hitl worker`)"
            if settings.redis_url else "in-process")
    return {"database": shown_database(settings.database_url), "agent": settings.agent, "jobs": jobs}


def describe(settings: Settings) -> str:
    """`described()` in one line (the start line of `hitl serve`)."""
    return ", ".join(f"{what} {value}" for what, value in described(settings).items())


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=".env", env_file_encoding="utf-8", populate_by_name=True,
                                      extra="ignore")

    database_url: str = Field("sqlite:///hitl.db", validation_alias="DATABASE_URL")
    redis_url: str | None = Field(None, validation_alias="REDIS_URL")
    agent: str = Field("gateway.demo:agent", validation_alias="HITL_AGENT")
    api_keys: Annotated[list[ApiKey], NoDecode] = Field(default_factory=list, validation_alias="HITL_API_KEYS")
    api_keys_file: Annotated[list[ApiKey], NoDecode] = Field(default_factory=list,
                                                             validation_alias="HITL_API_KEYS_FILE")
    """The entries of the file HITL_API_KEYS_FILE names (the variable holds its path)."""
    allowed_hosts: Annotated[list[str], NoDecode] = Field(default_factory=list, validation_alias="HITL_ALLOWED_HOSTS")
    lease_seconds: int = Field(30, ge=3, validation_alias="HITL_LEASE_SECONDS")
    job_timeout: int = Field(180, ge=1, validation_alias="HITL_JOB_TIMEOUT")
    queue: str = Field("hitl", pattern=r"^[A-Za-z0-9_-]+$", validation_alias="HITL_QUEUE")
    sweep_seconds: float = Field(10.0, gt=0, validation_alias="HITL_SWEEP_SECONDS")
    inline_workers: int = Field(4, ge=1, validation_alias="HITL_INLINE_WORKERS")
    web_threads: int = Field(32, ge=1, validation_alias="HITL_WEB_THREADS")  # per web process (gateway/asgi.py)
    worker_class: str = Field("simple", pattern=r"^(fork|simple)$", validation_alias="HITL_WORKER_CLASS")
    response_policy_timeout: float = Field(10.0, gt=0, validation_alias="HITL_RESPONSE_POLICY_TIMEOUT")
    request_policy_timeout: float = Field(30.0, gt=0, validation_alias="HITL_REQUEST_POLICY_TIMEOUT")
    retention_days: int = Field(30, ge=1, le=36500, validation_alias="HITL_RETENTION_DAYS")
    public_base_url: str | None = Field(None, validation_alias="PUBLIC_BASE_URL")
    callback_secret: str | None = Field(None, validation_alias="HITL_CALLBACK_SECRET")
    callback_allowed_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias="HITL_CALLBACK_ALLOWED_HOSTS")

    slack_bot_token: str | None = Field(None, validation_alias="SLACK_BOT_TOKEN")
    slack_signing_secret: str | None = Field(None, validation_alias="SLACK_SIGNING_SECRET")
    slack_client_id: str | None = Field(None, validation_alias="SLACK_CLIENT_ID")
    slack_client_secret: str | None = Field(None, validation_alias="SLACK_CLIENT_SECRET")
    slack_app_token: str | None = Field(None, validation_alias="SLACK_APP_TOKEN")
    slack_api_url: str = Field("https://slack.com/api/", validation_alias="SLACK_API_URL")
    slack_allowed_teams: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias="SLACK_ALLOWED_TEAMS")
    slack_allow_external_users: bool = Field(False, validation_alias="SLACK_ALLOW_EXTERNAL_USERS")

    twilio_account_sid: str | None = Field(None, validation_alias="TWILIO_ACCOUNT_SID")
    twilio_auth_token: str | None = Field(None, validation_alias="TWILIO_AUTH_TOKEN")
    twilio_from: str | None = Field(None, validation_alias="TWILIO_FROM")
    twilio_allow_from: Annotated[list[str], NoDecode] = Field(
        default_factory=list, validation_alias="TWILIO_ALLOW_FROM")
    twilio_api_url: str = Field("https://api.twilio.com", validation_alias="TWILIO_API_URL")

    github_webhook_secret: str | None = Field(None, validation_alias="GITHUB_WEBHOOK_SECRET")
    github_token: str | None = Field(None, validation_alias="GITHUB_TOKEN")
    github_bot_login: str | None = Field(None, validation_alias="GITHUB_BOT_LOGIN")
    github_api_url: str = Field("https://api.github.com", validation_alias="GITHUB_API_URL")
    github_min_permission: str = Field("write", validation_alias="GITHUB_MIN_PERMISSION")

    @field_validator("database_url")
    @classmethod
    def _supported_database(cls, value: str) -> str:
        if not value.startswith(DATABASES):
            raise ValueError("must be a sqlite:/// or postgresql:// URL")
        try:
            make_url(value)
        except (ValueError, ArgumentError):  # a port that is not a number (its own message would echo the URL)
            raise ValueError("is not a URL SQLAlchemy can read (is the port a number?)") from None
        return value

    @field_validator("github_min_permission", mode="before")
    @classmethod
    def _known_role(cls, value: object) -> object:
        """`GITHUB_MIN_PERMISSION=maintain`: the least role on a repository whose comments the bot acts on."""
        if isinstance(value, str):
            value = value.strip().lower()
            if value not in MIN_PERMISSIONS:
                raise ValueError(f"must be one of {', '.join(MIN_PERMISSIONS)}")
        return value

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: object) -> object:
        """`HITL_API_KEYS=key1=alice,key2=bob:operator` (gateway/apikeys.py), or in Python a dict of key to
        `principalId[:role]`. An error names the entry's number, never its key."""
        if isinstance(value, str):
            return parse_keys(value)
        if isinstance(value, dict):
            return [api_key(key, who, f"entry {number}")
                    for number, (key, who) in enumerate(value.items(), 1)]
        return value

    @field_validator("api_keys_file", mode="before")
    @classmethod
    def _read_api_keys_file(cls, value: object) -> object:
        """`HITL_API_KEYS_FILE=/etc/hitl/keys`: one entry a line."""
        return parse_key_file(value) if isinstance(value, str) and value.strip() else value or []

    @model_validator(mode="after")
    def _distinct_api_keys(self) -> Settings:
        check_distinct({"HITL_API_KEYS": self.api_keys, "HITL_API_KEYS_FILE": self.api_keys_file})
        return self

    @property
    def all_api_keys(self) -> list[ApiKey]:
        """HITL_API_KEYS's and HITL_API_KEYS_FILE's; none means the no-key mode (loopback is the operator)."""
        return [*self.api_keys, *self.api_keys_file]

    @field_validator("twilio_allow_from", "allowed_hosts", "slack_allowed_teams", "callback_allowed_hosts",
                     mode="before")
    @classmethod
    def _parse_lists(cls, value: object) -> object:
        """`TWILIO_ALLOW_FROM=+15551230001,+15551230002`, `HITL_ALLOWED_HOSTS=hitl.test,devbox`,
        `SLACK_ALLOWED_TEAMS=T0123ABCD,E0456EFGH`."""
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("callback_allowed_hosts")
    @classmethod
    def _host_names(cls, value: list[str]) -> list[str]:
        """Compared with a callback URL's host, which is lower case."""
        return [host.lower().rstrip(".") for host in value]

    @field_validator("callback_secret", mode="before")
    @classmethod
    def _whsec(cls, value: object) -> object:
        """`HITL_CALLBACK_SECRET=whsec_<base64>` (the error never shows the secret); blank is unset."""
        if isinstance(value, str) and value.strip():
            parse_secret(value.strip())
            return value.strip()
        return None if isinstance(value, str) else value

    @property
    def callback_key(self) -> bytes | None:
        """HITL_CALLBACK_SECRET's key, which signs external requests' callbacks."""
        return parse_secret(self.callback_secret) if self.callback_secret else None

    @field_validator("slack_allowed_teams")
    @classmethod
    def _slack_team_ids(cls, value: list[str]) -> list[str]:
        """Slack's ids of workspaces (`T...`) and Enterprise Grid organizations (`E...`)."""
        wrong = [item for item in value if not SLACK_TEAM.match(item)]
        if wrong:
            raise ValueError(f"entries are Slack team ids (T...) or enterprise ids (E...), not {', '.join(wrong)}")
        return value

    @field_validator("redis_url", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return value or None

    @field_validator("redis_url")
    @classmethod
    def _supported_redis(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(REDISES):
            raise ValueError("must be a redis://, rediss:// or unix:// URL")
        return value
