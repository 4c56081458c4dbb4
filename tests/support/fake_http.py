"""What the fake platform servers (Slack, Twilio, GitHub) share: writing a JSON answer."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def send_json(request: BaseHTTPRequestHandler, status: int, data: Any, headers: dict[str, str] | None = None) -> None:
    """Answer `request` with `data` as JSON, the given status and any extra headers."""
    payload = json.dumps(data).encode()
    request.send_response(status)
    for name, value in {**(headers or {}), "Content-Type": "application/json"}.items():
        request.send_header(name, value)
    request.send_header("Content-Length", str(len(payload)))
    request.end_headers()
    request.wfile.write(payload)
