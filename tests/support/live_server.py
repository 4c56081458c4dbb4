"""A Flask app on a real port (127.0.0.1, a free one) in a thread, for clients that need real HTTP: SSE, a browser."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

from flask import Flask
from werkzeug.serving import make_server


@contextmanager
def live_server(app: Flask) -> Iterator[str]:
    """Yields the base URL. On exit it waits for open requests: event streams end at their next heartbeat."""
    httpd = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=httpd.serve_forever, name="live-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}"
    finally:
        httpd.shutdown()
        httpd.server_close()
