"""The one request body limit, on every route (API, console, webhooks, Bolt's): a body over MAX_BODY_BYTES is a
413 that names the limit, answered before the route runs and without reading past the limit.

A `Content-Length` over the limit is refused unread, even by a route that never reads a body. A chunked body
(no `Content-Length`) is read here, up to one byte past the limit (Werkzeug's `MAX_CONTENT_LENGTH` stops the
read there): over the limit it is refused, else the route finds it read (`request.get_data()` is cached, and
the form parser and Bolt read that).
"""

from __future__ import annotations

from flask import Flask, Response, request
from werkzeug.exceptions import RequestEntityTooLarge

from .errors import error_response

MAX_BODY_BYTES = 2**20
"""The largest request body any route reads (a message or an answer is text for people, and a Slack, Twilio or
GitHub webhook is a few kilobytes: 1 MiB is plenty)."""


def init_app(app: Flask) -> None:
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY_BYTES + 1  # a chunked body's read stops one byte past the limit
    app.before_request(refuse_a_large_body)
    app.register_error_handler(RequestEntityTooLarge, too_large)


def refuse_a_large_body() -> None:
    if request.content_length is not None:
        if request.content_length > MAX_BODY_BYTES:
            raise RequestEntityTooLarge()
    elif request.environ.get("wsgi.input_terminated") and len(request.get_data()) > MAX_BODY_BYTES:
        raise RequestEntityTooLarge()  # the server de-chunks the body: only reading it tells its size


def too_large(exc: RequestEntityTooLarge) -> tuple[Response, int]:
    return error_response(413, "body_too_large", f"the request body may be at most {MAX_BODY_BYTES} bytes",
                          {"maxBytes": MAX_BODY_BYTES})
