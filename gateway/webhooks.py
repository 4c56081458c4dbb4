"""Where a platform's webhook crosses between Flask and an adapter, both ways, for every channel: the Flask request
as the contract's neutral `WebhookRequest`, and the adapter's `WebhookReply` as a Flask response."""

from __future__ import annotations

from flask import Response, request

from engine.channels.contract import WebhookReply, WebhookRequest


def webhook_request(*, form: bool = False) -> WebhookRequest:
    """The current request, its header names in lower case; `form`: with every value of every form field (read
    after the raw body, which reading the form would otherwise consume)."""
    body = request.get_data()
    return WebhookRequest(path=request.path, headers={name.lower(): value for name, value in request.headers.items()},
                          body=body, method=request.method, query=request.query_string.decode("latin-1"),
                          form=request.form.to_dict(flat=False) if form else {})


def webhook_response(reply: WebhookReply) -> Response:
    """The adapter's reply as it goes back to the platform (a repeated header, such as `set-cookie`, kept)."""
    response = Response(reply.body, reply.status)
    if any(name.lower() == "content-type" for name, _ in reply.headers):
        del response.headers["Content-Type"]
    for name, value in reply.headers:
        response.headers.add(name, value)
    return response
