"""The README's first command installs the gateway without extras (`pip install -e .`) and runs it: everything
the gateway imports must come with its own dependencies, not with the test tools that happen to share the
test environment. A subprocess imports every module of the gateway, builds the app on its embedded defaults and
starts a session, with imports refused of every installed module outside the dependency closure of a plain
install. A module of an extra (`hitl mcp`'s server, the LangGraph bridge) is imported with its extra's packages
only, so that it too imports nothing the extra does not bring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, distribution, packages_distributions
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "hitl-gateway"
OURS = ("engine", "adapters", "gateway")
EXTRAS = {"gateway.mcp_server": "mcp", "gateway.langgraph": "langgraph"}
"""Our modules that need an extra, by the extra: a plain install never imports them (`hitl mcp` says which to
install when it is missing; `pip install 'hitl-gateway[langgraph]'` brings the LangGraph bridge)."""

REFUSING = """
import importlib.abc, json, pkgutil, sys
refused = set(json.loads(sys.argv[1]))

class OnlyPlainInstall(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        top = name.partition(".")[0]
        if top in refused:
            raise ModuleNotFoundError(f"No module named {top!r} (`pip install -e .` does not install it)", name=top)
        return None

sys.meta_path.insert(0, OnlyPlainInstall())
"""
"""Refuses to import the top-level modules named in the first argument, as if they were not installed."""
PLAIN_INSTALL = REFUSING + """
for package in ("engine", "adapters", "gateway"):
    root = __import__(package)
    for module in pkgutil.walk_packages(root.__path__, package + "."):
        if not module.name.endswith("__main__") and module.name not in EXTRAS:
            __import__(module.name)

from gateway.app import create_app
response = create_app().test_client().post("/api/sessions", json={"message": "refund $20 on ch_1001"})
assert response.status_code == 201, (response.status_code, response.get_data(as_text=True))
print("ok")
""".replace("EXTRAS", repr(set(EXTRAS)))


def installed_closure(name: str, extra: str | None = None) -> set[str]:
    """The distributions `pip install <name>` brings (`<name>[extra]` with `extra`): its requirements, each with
    the extras it asks for, recursively (environment markers evaluated here)."""
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    todo = [(canonicalize_name(name), frozenset([extra] if extra else []))]
    while todo:
        current, extras = todo.pop()
        if (current, extras) in seen:
            continue
        seen.add((current, extras))
        try:
            requires = distribution(current).requires or []
        except PackageNotFoundError:  # a requirement for another platform
            continue
        found.add(current)
        for raw in requires:
            requirement = Requirement(raw)
            marker = requirement.marker
            if marker is None or any(marker.evaluate({"extra": extra}) for extra in {"", *extras}):
                todo.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return found


def refused_names(closure: set[str]) -> set[str]:
    """The top-level modules installed here by distributions outside `closure` alone."""
    return {top for top, owners in packages_distributions().items()
            if not any(canonicalize_name(owner) in closure for owner in owners)} - set(OURS)


def test_a_plain_install_imports_and_serves_without_the_test_tools(tmp_path: Path) -> None:
    closure = installed_closure(PROJECT)
    assert {"flask", "sqlalchemy", "slack-bolt", "rq"} <= closure  # the closure walks the real metadata
    assert "pytest" not in closure and "playwright" not in closure
    refused = refused_names(closure)
    assert {"pytest", "playwright"} <= refused
    done = refusing(refused, PLAIN_INSTALL, tmp_path)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def test_a_module_of_an_extra_imports_only_what_the_extra_brings(tmp_path: Path) -> None:
    for module, extra in EXTRAS.items():
        closure = installed_closure(PROJECT, extra)
        assert extra in closure and "pytest" not in closure
        done = refusing(refused_names(closure), REFUSING + f"import {module}; print('ok')", tmp_path)
        assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


def refusing(refused: set[str], script: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """`script` in a fresh interpreter (started with REFUSING), refusing the modules `refused`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HITL_", "SLACK_", "TWILIO_", "GITHUB_"))}
    env.pop("DATABASE_URL", None)
    env.pop("REDIS_URL", None)
    return subprocess.run([sys.executable, "-c", script, json.dumps(sorted(refused))], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
