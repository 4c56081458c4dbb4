"""DESIGN.md section 2: gateway -> adapters -> engine; nothing points upward, adapters never import each other."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

from tests.support.imports import SERVER_SIDE, packages_loaded_by

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {
    "engine": {"flask", "werkzeug", "gateway", "adapters", "slack_bolt", "slack_sdk", "twilio"},
    "adapters": {"gateway", "flask"},
}


def imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
    return found


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", ["engine", "adapters"])
def test_no_upward_imports(package: str) -> None:
    problems = []
    for path in sources(package):
        for module in imported_modules(path):
            top = module.split(".")[0]
            if top in FORBIDDEN[package]:
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
    assert problems == []


def test_adapters_do_not_import_each_other() -> None:
    problems = []
    for path in sources("adapters"):
        parts = path.relative_to(ROOT / "adapters").parts
        if len(parts) < 2:
            continue
        own = parts[0]
        for module in imported_modules(path):
            names = module.split(".")
            if names[0] == "adapters" and len(names) > 1 and names[1] != own:
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
    assert problems == []


ENGINE_FOR_ADAPTERS = {
    "engine.channels.contract", "engine.channels.port", "engine.protocol", "engine.errors", "engine.answers.options",
    "engine.answers.forms", "engine.defaults",
}
"""The engine's channel-facing modules: all an adapter may import of the engine (the runtime, its database and
its tables stay behind engine.channels.port)."""


def test_adapters_import_only_the_channel_facing_engine() -> None:
    problems = []
    for path in sources("adapters"):
        for module in imported_modules(path):
            if module.split(".")[0] == "engine" and module not in ENGINE_FOR_ADAPTERS:
                problems.append(f"{path.relative_to(ROOT)} imports {module}")
    assert problems == []


def test_the_channel_facing_modules_exist() -> None:
    missing = [m for m in ENGINE_FOR_ADAPTERS if not (ROOT / f"{m.replace('.', '/')}.py").is_file()]
    assert missing == []


def test_the_adapters_import_rule_sees_a_forbidden_engine_module(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("from engine.jobs.runtime import current\nfrom engine.channels.port import ChannelPort\n")
    assert imported_modules(sample) - ENGINE_FOR_ADAPTERS == {"engine.jobs.runtime"}


def test_no_adapter_uses_the_process_global_runtime() -> None:
    users = [str(path.relative_to(ROOT)) for path in sources("adapters") if "current()" in path.read_text()]
    assert users == []


BESIDE_AGENTS = {"gateway.client": {"requests"}, "gateway.langgraph": {"gateway", "langgraph", "langchain_core"}}
"""Modules that run in an agent's process, not the gateway's, and the packages they may import besides the standard
library (langchain_core: LangGraph's RunnableConfig)."""


@pytest.mark.parametrize("module", sorted(BESIDE_AGENTS))
def test_what_runs_beside_an_agent_imports_only_the_standard_library_and_its_own(module: str) -> None:
    imported = imported_modules(ROOT / f"{module.replace('.', '/')}.py")

    assert {m.split(".")[0] for m in imported} - set(sys.stdlib_module_names) == BESIDE_AGENTS[module]
    assert {m for m in imported if m.startswith("gateway")} <= {"gateway.client"}


@pytest.mark.parametrize("module", sorted(BESIDE_AGENTS))
def test_importing_what_runs_beside_an_agent_loads_neither_flask_nor_sqlalchemy(module: str) -> None:
    loaded = packages_loaded_by(module)

    assert BESIDE_AGENTS[module] - {"gateway"} <= loaded
    assert not loaded & SERVER_SIDE


def test_the_walker_sees_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("import flask\nfrom gateway.app import create_app\nfrom . import sibling\n")
    assert imported_modules(sample) == {"flask", "gateway.app"}
