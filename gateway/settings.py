"""All configuration, from the environment (one pydantic-settings class; the README's table mirrors it)."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_file=None, populate_by_name=True, extra="ignore")

    database_url: str = Field("sqlite:///hitl.db", validation_alias="DATABASE_URL")
    redis_url: str | None = Field(None, validation_alias="REDIS_URL")
    agent: str = Field("gateway.demo:agent", validation_alias="HITL_AGENT")
    api_keys: Annotated[dict[str, str], NoDecode] = Field(default_factory=dict, validation_alias="HITL_API_KEYS")
    lease_seconds: int = Field(30, ge=3, validation_alias="HITL_LEASE_SECONDS")
    queue: str = Field("hitl", pattern=r"^[A-Za-z0-9_-]+$", validation_alias="HITL_QUEUE")
    sweep_seconds: float = Field(10.0, gt=0, validation_alias="HITL_SWEEP_SECONDS")
    inline_workers: int = Field(4, ge=1, validation_alias="HITL_INLINE_WORKERS")
    worker_class: str = Field("fork", pattern=r"^(fork|simple)$", validation_alias="HITL_WORKER_CLASS")
    response_policy_timeout: float = Field(10.0, gt=0, validation_alias="HITL_RESPONSE_POLICY_TIMEOUT")

    @field_validator("api_keys", mode="before")
    @classmethod
    def _parse_api_keys(cls, value: object) -> object:
        """`HITL_API_KEYS=key1=alice,key2=bob`: each key acts as the principal named after `=`."""
        if not isinstance(value, str):
            return value
        keys: dict[str, str] = {}
        for item in filter(None, (part.strip() for part in value.split(","))):
            key, sep, principal = item.partition("=")
            if not sep or not key.strip() or not principal.strip():
                raise ValueError(f"HITL_API_KEYS entries look like key=principalId, not {item!r}")
            keys[key.strip()] = principal.strip()
        return keys

    @field_validator("redis_url", mode="before")
    @classmethod
    def _blank_is_none(cls, value: object) -> object:
        return value or None
