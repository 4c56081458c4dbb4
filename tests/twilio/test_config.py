"""The SMS channel is on when TWILIO_ACCOUNT_SID is set, and a half-done configuration fails at start-up."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.compose import ConfigurationError
from tests.conftest import Stack, sqlite_settings
from tests.twilio.support import twilio_settings


@contextmanager
def stack_with(tmp_path: Path, **overrides: Any) -> Iterator[Stack]:
    stack = Stack("sqlite", sqlite_settings(tmp_path, **overrides))
    try:
        yield stack
    finally:
        stack.close()


def app_with(tmp_path: Path, **overrides: Any) -> None:
    with stack_with(tmp_path, **{**twilio_settings("http://127.0.0.1:9"), **overrides}):
        pass


@pytest.mark.parametrize(("unset", "message"), [
    (["twilio_auth_token"], "TWILIO_ACCOUNT_SID, TWILIO_FROM and PUBLIC_BASE_URL are set but TWILIO_AUTH_TOKEN is "
                            "missing"),
    (["twilio_from", "public_base_url"], "TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN are set but TWILIO_FROM and "
                                         "PUBLIC_BASE_URL are missing"),
    (["twilio_account_sid", "twilio_from", "public_base_url"],
     "TWILIO_AUTH_TOKEN is set but TWILIO_ACCOUNT_SID, TWILIO_FROM and PUBLIC_BASE_URL are missing"),
])
def test_half_a_twilio_configuration_fails_at_start_naming_what_is_missing(tmp_path: Path, unset: list[str],
                                                                          message: str) -> None:
    """The wording every channel uses: what is set, and each variable missing (any Twilio credential turns the
    channel on: a token without its account is a mistake, not SMS switched off)."""
    with pytest.raises(ConfigurationError) as failed:
        app_with(tmp_path, **dict.fromkeys(unset))
    assert str(failed.value) == f"Twilio is half configured: {message}"


@pytest.mark.parametrize(("field", "value", "named"), [
    ("twilio_from", "555-1000", "TWILIO_FROM"), ("twilio_allow_from", ["alice=5551111"], "TWILIO_ALLOW_FROM"),
    ("public_base_url", "hitl.example.com", "PUBLIC_BASE_URL")])
def test_malformed_settings_fail_at_start(tmp_path: Path, field: str, value: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match=named):
        app_with(tmp_path, **{field: value})


def test_without_an_account_there_is_no_sms_channel(tmp_path: Path) -> None:
    with stack_with(tmp_path) as stack:
        assert "twilio" not in stack.rt.channels
        assert stack.app.test_client().post("/twilio/sms", data={"Body": "hi"}).status_code == 404
