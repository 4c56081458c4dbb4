"""Settings come from the environment and from `.env` in the working directory; `.env.example` lists them all."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gateway.settings import Settings, load_settings
from tests.conftest import ROOT


def test_a_dotenv_file_in_the_working_directory_is_read_and_the_environment_wins(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HITL_QUEUE", raising=False)
    monkeypatch.setenv("HITL_AGENT", "from.environment:agent")
    (tmp_path / ".env").write_text("# a comment\nHITL_QUEUE=from-dotenv\nHITL_AGENT=from.dotenv:agent\n"
                                   "SOMETHING_ELSE=ignored\n")

    settings = load_settings()

    assert settings.queue == "from-dotenv"
    assert settings.agent == "from.environment:agent"


def test_env_example_lists_every_setting_each_with_a_comment() -> None:
    lines = (ROOT / ".env.example").read_text().splitlines()
    variable = re.compile(r"# ([A-Z][A-Z0-9_]+)=.*")
    listed = {}
    for number, line in enumerate(lines):
        match = variable.fullmatch(line)
        if match:
            listed[match.group(1)] = lines[number - 1]
    names = {str(field.validation_alias) for field in Settings.model_fields.values()}

    assert names - set(listed) == set(), "variables .env.example does not list"
    assert set(listed) - names == set(), "variables .env.example lists that no setting reads"
    for name, above in listed.items():
        assert above.startswith("# ") and not variable.fullmatch(above), f"{name} has no comment line above it"
