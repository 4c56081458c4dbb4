"""A callback receiver: it checks each callback's Standard Webhooks signature with the gateway's
HITL_CALLBACK_SECRET and prints the request's outcome; anything unsigned, or signed more than 5 minutes ago, is
refused with a 401.

    HITL_CALLBACK_SECRET=whsec_... python -m examples.agents_anywhere.callback_receiver   # listens on :8001

Then open a request with `"callbackUrl": "http://<this host>:8001/hitl"`. The gateway retries a callback that
does not get a 2xx for 24 h, with the same `webhook-id`: a receiver that acts on one acts once per id.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

TOLERANCE_SECONDS = 300


class Unverified(Exception):
    """Not a callback signed with our secret, now."""


def verify(secret: str, headers: Mapping[str, str], body: bytes, now: float | None = None) -> dict[str, Any]:
    """The callback's JSON if `webhook-signature` holds the HMAC-SHA256 of `<webhook-id>.<webhook-timestamp>.<body>`
    under the secret's key, and the timestamp is recent (what the `standardwebhooks` package checks too)."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    message_id, timestamp = headers.get("webhook-id", ""), headers.get("webhook-timestamp", "")
    if not message_id or not timestamp.isdigit():
        raise Unverified("missing webhook-id or webhook-timestamp")
    if abs((now or time.time()) - int(timestamp)) > TOLERANCE_SECONDS:
        raise Unverified("the timestamp is too old or too new")
    expected = base64.b64encode(hmac.new(key, f"{message_id}.{timestamp}.".encode() + body,
                                         hashlib.sha256).digest()).decode()
    given = [part.split(",", 1)[1] for part in headers.get("webhook-signature", "").split() if part.startswith("v1,")]
    if not any(hmac.compare_digest(expected, signature) for signature in given):
        raise Unverified("no signature matches")
    payload: dict[str, Any] = json.loads(body)
    return payload


def receiver(secret: str, handle: Callable[[str, dict[str, Any]], None]) -> type[BaseHTTPRequestHandler]:
    """A request handler that calls `handle(webhook id, payload)` for each verified callback, once per id."""
    seen: set[str] = set()

    class Receiver(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - the standard library's name
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            headers = {name.lower(): value for name, value in self.headers.items()}
            try:
                payload = verify(secret, headers, body)
            except (Unverified, ValueError):
                self.send_response(401)
            else:
                if headers["webhook-id"] not in seen:  # a retry of one already handled is only acknowledged
                    seen.add(headers["webhook-id"])
                    handle(headers["webhook-id"], payload)
                self.send_response(204)
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Receiver


def show(message_id: str, payload: dict[str, Any]) -> None:
    request = payload["request"]
    who = (request.get("responder") or {}).get("principalId", "nobody")
    print(f"{message_id}: {request['prompt']} -> {request['outcome']} by {who}", flush=True)


def main() -> None:
    server = ThreadingHTTPServer(("0.0.0.0", int(os.environ.get("PORT", "8001"))),
                                 receiver(os.environ["HITL_CALLBACK_SECRET"], show))
    server.serve_forever()


if __name__ == "__main__":
    main()
