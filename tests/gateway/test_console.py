"""The web console is served at `/` with its static assets, and needs nothing from outside the gateway."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from gateway.app import create_app
from tests.conftest import sqlite_settings

STATIC = Path(__file__).resolve().parents[2] / "gateway" / "console" / "static"
TYPES = {".html": "text/html", ".css": "text/css", ".js": "text/javascript"}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[FlaskClient]:
    app = create_app(sqlite_settings(tmp_path))  # API keys configured: the page itself still needs none
    yield app.test_client()
    app.extensions["hitl"].executor.shutdown()
    app.extensions["hitl"].db.dispose()


def assets() -> list[Path]:
    return sorted(p for p in STATIC.rglob("*") if p.is_file())


def test_the_console_page_is_served_at_the_root_without_a_key(client: FlaskClient) -> None:
    page = client.get("/")
    assert page.status_code == 200
    assert page.mimetype == "text/html"
    assert "<title>hitl-gateway console</title>" in page.text
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert client.get("/api/sessions").status_code == 401  # the API behind it still wants one


def test_every_asset_the_page_loads_is_served_with_its_content_type(client: FlaskClient) -> None:
    page = client.get("/").text
    referenced = re.findall(r'(?:href|src)="(/console/[^"]+)"', page)
    assert {"/console/console.css", "/console/js/main.js"} <= set(referenced)
    for path in assets():
        response = client.get(f"/console/{path.relative_to(STATIC).as_posix()}")
        assert response.status_code == 200, path
        assert response.mimetype in (TYPES[path.suffix], "application/javascript"), path


def test_every_module_import_resolves_to_a_served_file(client: FlaskClient) -> None:
    for module in STATIC.glob("js/*.js"):
        for target in re.findall(r'^import .* from "(\./[^"]+)";$', module.read_text(), flags=re.MULTILINE):
            assert (module.parent / target).is_file(), f"{module.name} imports missing {target}"
            assert client.get(f"/console/js/{target[2:]}").status_code == 200


def test_nothing_is_loaded_from_another_host(client: FlaskClient) -> None:
    for path in assets():
        text = path.read_text()
        assert not re.search(r"https?://", text), f"{path.name} names an external URL"
        assert not re.search(r'(?:src|href)="//', text), f"{path.name} names a protocol-relative URL"
