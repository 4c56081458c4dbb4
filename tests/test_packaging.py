"""A regular install is the gateway whole: the wheel holds every file the packages read at run time (the console,
the migrations, the Slack manifest) and each package's `py.typed`, and `hitl serve` from a fresh environment that
has only the wheel (and its dependencies) serves the console.

No network: the wheel is built without build isolation (setuptools comes with the test extra), and installed
without its dependencies into a new environment that borrows them from this one's site-packages by a `.pth` file
(a path there, not an import hook: this environment's editable install of the source tree stays out of it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engine", "adapters", "gateway")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel `pip wheel --no-deps .` builds, from a copy of the project (the build writes next to its sources)."""
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    for package in PACKAGES:
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
                    "-w", str(out), str(source)], check=True, capture_output=True, timeout=300)
    [built] = out.glob("hitl_gateway-*.whl")
    return built


def source_files(package: str) -> set[str]:
    """Every file of a package's tree that is not Python bytecode, as the wheel names it."""
    return {path.relative_to(ROOT).as_posix() for path in (ROOT / package).rglob("*")
            if path.is_file() and "__pycache__" not in path.parts}


def test_the_wheel_holds_every_file_of_the_packages_and_their_type_markers(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        shipped = set(archive.namelist())
    for package in PACKAGES:
        assert source_files(package) - shipped == set(), f"{package}: files the wheel leaves out"
        assert f"{package}/py.typed" in shipped
    assert {"gateway/console/static/index.html", "gateway/console/static/js/main.js", "engine/store/migrations/env.py",
            "adapters/slack/manifest.yml"} <= shipped


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh environment with the wheel installed in it; its dependencies are this environment's."""
    venv = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps", "--no-index", "-q",
                    str(wheel)], check=True, capture_output=True, timeout=300)
    site_packages = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                   check=True, capture_output=True, text=True).stdout.strip()
    ours = sysconfig.get_paths()
    Path(site_packages, "dependencies.pth").write_text(f"{ours['purelib']}\n{ours['platlib']}\n")
    return venv


def test_hitl_serve_from_an_installed_wheel_serves_the_console(installed: Path, tmp_path: Path) -> None:
    env = {name: value for name, value in os.environ.items()
           if name not in ("PYTHONPATH", "HITL_AGENT", "HITL_API_KEYS", "REDIS_URL")}
    env["DATABASE_URL"] = f"sqlite:///{tmp_path / 'hitl.db'}"
    where = subprocess.run([str(installed / "bin" / "python"), "-c", "import engine, gateway; print(gateway.__file__)"],
                           cwd=tmp_path, env=env, check=True, capture_output=True, text=True).stdout
    assert where.startswith(str(installed)), f"gateway imported from {where}, not from the installed wheel"
    server = subprocess.Popen([str(installed / "bin" / "hitl"), "serve", "--port", "0"], cwd=tmp_path, env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and server.stderr is not None
        line = server.stdout.readline()
        assert line.startswith("hitl-gateway serving "), server.stderr.read() if server.poll() is not None else line
        url = line.split()[2]

        page = requests.get(f"{url}/", timeout=10)

        assert page.status_code == 200 and page.headers["Content-Type"].startswith("text/html")
        [script] = re.findall(r'<script type="module" src="([^"]+)"', page.text)
        module = requests.get(f"{url}{script}", timeout=10)
        assert module.status_code == 200 and module.headers["Content-Type"].startswith("text/javascript")
        assert "import" in module.text
    finally:
        server.terminate()
        server.wait(10)


@pytest.fixture(autouse=True)
def no_build_leftovers() -> Iterator[None]:
    """The build never writes into the project itself (two test runs at once would share it)."""
    before = {path.name for path in ROOT.iterdir()}
    yield
    assert {path.name for path in ROOT.iterdir()} - before == set()
