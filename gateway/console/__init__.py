"""The web console at `/`: static HTML, CSS and JavaScript modules over the public REST API and event stream.

No build step and no external URL: it works offline. It has no auth of its own; the API it calls does
(the local operator on loopback, or an API key the user pastes, kept in the browser's localStorage).
"""

from __future__ import annotations

from flask import Blueprint, Response

__all__ = ["bp"]

bp = Blueprint("console", __name__, static_folder="static", static_url_path="/console")

# Everything comes from this origin; nothing inline, nothing from a CDN.
CONTENT_SECURITY_POLICY = "default-src 'self'; img-src 'self' data:; base-uri 'none'; frame-ancestors 'none'"


@bp.get("/")
def index() -> Response:
    response = bp.send_static_file("index.html")
    response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
    return response
