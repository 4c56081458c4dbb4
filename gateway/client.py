"""The Python client of the gateway's REST API for agents that run anywhere (docs/agents-anywhere.md).

    from gateway.client import HitlClient, Answer, Denied, Expired

    hitl = HitlClient("https://hitl.example.com", api_key="...")   # or HITL_URL / HITL_API_KEY
    req = hitl.request_approval(tool="refund_charge", input={"charge": "ch_1"}, approvers=["slack:T1:U1"])
    settled = hitl.wait(req["requestId"])                          # the closed request
    answer = hitl.ask("Which plan?", options=["Basic", "Pro"])     # Answer(option_id, text, responder, ...)

    @hitl.require_approval(to={"channel": "slack", "address": {"channel": "C0123"}}, timeout=3600)
    def refund_charge(charge_id: str, amount: float) -> dict: ...

    payload = verify_callback(raw_body, headers)                  # a callback, once its signature is checked

It imports only the standard library and `requests`, so an agent's process needs nothing else of the gateway.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import hmac
import inspect
import json
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import requests

__all__ = ["Answer", "CallbackRefused", "Denied", "Expired", "HitlClient", "HitlError", "verify_callback"]

F = TypeVar("F", bound=Callable[..., Any])
Places = dict[str, Any] | list[dict[str, Any]]
"""`to`: a place (`{"channel", "address"}`, `{"person": name}`, `{"group": name}`) or a list of them."""
LONG_POLL_SECONDS = 60
"""The longest wait the API holds one long-poll (`GET /api/requests/<id>?wait=`)."""
CALLBACK_TOLERANCE_SECONDS = 300
"""How far a callback's `webhook-timestamp` may be from now (what the `standardwebhooks` package allows too)."""


class HitlError(Exception):
    """The API refused a call: `status` (HTTP), `code` and `message` (the API's error), `details`."""

    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message} (HTTP {status})")
        self.status, self.code, self.message, self.details = status, code, message, details


class Denied(Exception):
    """A person denied the approval: `note` (what they said, if anything), `responder` (who, as a principal)."""

    def __init__(self, request: dict[str, Any]) -> None:
        self.request = request
        self.note: str | None = (request.get("response") or {}).get("text")
        self.responder: dict[str, Any] | None = request.get("responder")
        who = name_of(self.responder)
        super().__init__(f"denied by {who}" + (f": {self.note}" if self.note else ""))


class Expired(TimeoutError):
    """Nobody answered in time: the request expired or was cancelled, or the wait's timeout passed. `request` is
    the request as last read."""

    def __init__(self, request: dict[str, Any], why: str) -> None:
        super().__init__(why)
        self.request = request


@dataclass(frozen=True)
class Answer:
    """A question's answer: the option chosen (`option_id`, its `label`) or the `text` typed, and who answered
    (`responder`, a principal: `principalId`, `attributes.userName`...)."""

    option_id: str | None
    text: str | None
    responder: dict[str, Any] | None
    label: str | None = None
    request: dict[str, Any] | None = None

    @classmethod
    def of(cls, request: dict[str, Any]) -> Answer:
        """The answer of an answered question (a request as the API gives it)."""
        response = request.get("response") or {}
        labels = {o["id"]: o["label"] for o in request.get("options", [])}
        option_id = response.get("optionId")
        return cls(option_id, response.get("text"), request.get("responder"), labels.get(option_id or ""), request)


def name_of(principal: dict[str, Any] | None) -> str:
    if not principal:
        return "someone"
    attributes = principal.get("attributes") or {}
    return str(attributes.get("userName") or attributes.get("login") or principal.get("principalId"))


def as_option(option: str | dict[str, Any]) -> dict[str, Any]:
    """A string is an option whose id and label are that string."""
    return {"id": option, "label": option} if isinstance(option, str) else dict(option)


def json_safe(value: Any) -> Any:
    """`value` as JSON holds it; what JSON cannot hold (a datetime, a Decimal) as its string."""
    return json.loads(json.dumps(value, default=str))


class HitlClient:
    """A client of one gateway. `url` and `api_key` default to HITL_URL and HITL_API_KEY (no key: a gateway
    without HITL_API_KEYS, from its own machine). `expiry_grace`: how long past a timeout to wait for the gateway
    to close the request itself (its sweep expires requests every HITL_SWEEP_SECONDS) before cancelling it."""

    def __init__(self, url: str | None = None, api_key: str | None = None, *, timeout: float = 30.0,
                 expiry_grace: float = 30.0, session: requests.Session | None = None) -> None:
        url = url or os.environ.get("HITL_URL")
        if not url:
            raise ValueError("the gateway's URL: HitlClient(url=...) or HITL_URL")
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.expiry_grace = expiry_grace
        self.http = session or requests.Session()
        key = api_key if api_key is not None else os.environ.get("HITL_API_KEY")
        if key:
            self.http.headers["Authorization"] = f"Bearer {key}"

    # -- the API ------------------------------------------------------------------------------------------

    def call(self, method: str, path: str, *, body: dict[str, Any] | None = None,
             params: dict[str, Any] | None = None, read_timeout: float | None = None) -> dict[str, Any]:
        """One API call; its JSON answer, or HitlError naming the API's error code and message."""
        response = self.http.request(method, self.url + path, json=body, params=params,
                                     timeout=(self.timeout, read_timeout or self.timeout))
        try:
            data = response.json()
        except ValueError:
            data = None
        if response.status_code >= 400:
            error = data.get("error") if isinstance(data, dict) else None
            if not isinstance(error, dict):
                raise HitlError(response.status_code, "http_error", response.text[:200] or response.reason)
            raise HitlError(response.status_code, str(error.get("code")), str(error.get("message")),
                            error.get("details"))
        if not isinstance(data, dict):
            raise HitlError(response.status_code, "not_json", f"{method} {path} did not answer a JSON object")
        return data

    def request_approval(self, tool: str, input: dict[str, Any], to: Places | None = None,
                         approvers: list[str] | None = None, expires_in: int | None = None,
                         idempotency_key: str | None = None, callback_url: str | None = None,
                         metadata: dict[str, Any] | None = None, prompt: str | None = None,
                         editable: bool = False, input_schema: dict[str, Any] | None = None,
                         quorum: int | None = None) -> dict[str, Any]:
        """Ask people to approve a tool call (POST /api/requests); returns the request, pending (or, for an
        idempotency key used before, as it is now). It does not wait: `wait(req["requestId"])` does. `editable`:
        people may approve it with another input, which must fit `input_schema` (a JSON Schema; none: any object);
        the closed request's `response.input` is then the input approved (`action.input` the one proposed).
        `quorum`: how many distinct approvers must approve it."""
        action = {"kind": "tool-call", "toolName": tool, "input": json_safe(input)}
        if input_schema is not None:
            action["inputSchema"] = input_schema
        body = {"kind": "tool-approval", "prompt": prompt, "action": action, "editable": editable or None,
                "quorum": quorum}
        return self.open(body, to, approvers, expires_in, idempotency_key, callback_url, metadata)

    def request_answer(self, prompt: str, options: list[str | dict[str, Any]] | None = None,
                       allow_freeform: bool = True, to: Places | None = None,
                       approvers: list[str] | None = None, expires_in: int | None = None,
                       idempotency_key: str | None = None, callback_url: str | None = None,
                       metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        """Ask people a question (options as strings or `{id, label, description?}`); returns the request."""
        body = {"kind": "question", "prompt": prompt, "allowFreeform": allow_freeform,
                "options": [as_option(o) for o in options] if options else None}
        return self.open(body, to, approvers, expires_in, idempotency_key, callback_url, metadata)

    def open(self, body: dict[str, Any], to: Places | None, approvers: list[str] | None,
             expires_in: int | None, idempotency_key: str | None, callback_url: str | None,
             metadata: dict[str, Any] | None) -> dict[str, Any]:
        given = {**body, "to": to, "approvers": approvers, "expiresIn": expires_in, "idempotencyKey": idempotency_key,
                 "callbackUrl": callback_url, "metadata": metadata}
        return self.call("POST", "/api/requests", body={k: v for k, v in given.items() if v is not None})

    def get(self, request_id: str) -> dict[str, Any]:
        return self.call("GET", f"/api/requests/{request_id}")

    def cancel(self, request_id: str) -> dict[str, Any]:
        """Close a request of this client's `cancelled` (its places update, its callback hears it)."""
        return self.call("POST", f"/api/requests/{request_id}/cancel")

    def wait(self, request_id: str, timeout: float | None = None) -> dict[str, Any]:
        """The request once it is closed (approved, denied, answered, expired or cancelled), long-polling in
        slices of at most 60 s; Expired when `timeout` seconds pass first (the request stays open)."""
        ends = None if timeout is None else time.monotonic() + timeout
        while True:
            left = LONG_POLL_SECONDS if ends is None else min(LONG_POLL_SECONDS, ends - time.monotonic())
            request = self.call("GET", f"/api/requests/{request_id}", params={"wait": max(int(left), 0)},
                                read_timeout=max(left, 0) + self.timeout)
            if request["status"] != "pending":
                return request
            if ends is not None and time.monotonic() >= ends - 0.5:
                raise Expired(request, f"request {request_id} is still open after {timeout:g} s")

    # -- blocking helpers -----------------------------------------------------------------------------------

    def ask(self, prompt: str, options: list[str | dict[str, Any]] | None = None, allow_freeform: bool = True,
            to: Places | None = None, approvers: list[str] | None = None,
            timeout: float | None = 600) -> Answer:
        """Ask a question and wait for its answer; Expired when nobody answers within `timeout` seconds."""
        request = self.request_answer(prompt, options, allow_freeform, to, approvers, expires_in=expiry(timeout))
        closed = self.closed(request, timeout)
        if closed["outcome"] != "answered":
            raise Expired(closed, f"nobody answered {prompt!r} ({closed['outcome']})")
        return Answer.of(closed)

    def require_approval(self, to: Places | None = None, approvers: list[str] | None = None,
                         timeout: float | None = 3600, tool: str | None = None,
                         prompt: str | None = None) -> Callable[[F], F]:
        """A decorator: each call asks people to approve it first, with its arguments as the input (bound to the
        function's parameters by name) and the function's name as the tool. Approved: it runs, once, and returns.
        Denied: Denied (`note`, `responder`). Expired, cancelled or past `timeout`: Expired."""
        def decorate(fn: F) -> F:
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def approved(*args: Any, **kwargs: Any) -> Any:
                bound = signature.bind(*args, **kwargs)
                bound.apply_defaults()
                request = self.request_approval(tool or fn.__name__, dict(bound.arguments), to, approvers,
                                                expires_in=expiry(timeout), prompt=prompt)
                closed = self.closed(request, timeout)
                if closed["outcome"] == "approved":
                    return fn(*args, **kwargs)
                if closed["outcome"] == "denied":
                    raise Denied(closed)
                raise Expired(closed, f"{tool or fn.__name__} was not approved in time ({closed['outcome']})")

            return approved  # type: ignore[return-value]

        return decorate

    def closed(self, request: dict[str, Any], timeout: float | None) -> dict[str, Any]:
        """Wait for a request that expires after `timeout`: the gateway closes it `expired` then; if it has not a
        little later (no sweep ran), this client cancels it, so nobody answers a question nobody waits for."""
        try:
            return self.wait(request["requestId"], None if timeout is None else timeout + self.expiry_grace)
        except Expired:
            try:
                return self.cancel(request["requestId"])
            except HitlError as exc:
                if exc.code != "request_closed":  # closed meanwhile: its outcome stands
                    raise
                return self.get(request["requestId"])


def expiry(timeout: float | None) -> int | None:
    """`expiresIn` for a wait of `timeout` seconds (at least 1)."""
    return None if timeout is None else max(1, int(timeout + 0.999))


class CallbackRefused(Exception):
    """A callback not signed with the secret, or not signed now (the message says which): answer it 401."""


def verify_callback(body: bytes | str, headers: Mapping[str, str], secret: str | None = None,
                    now: float | None = None) -> dict[str, Any]:
    """A callback's JSON (`{"type": "input.resolved", "request": {...}}`) once its Standard Webhooks signature is
    checked: `webhook-signature` holds `v1,<base64 of HMAC-SHA256 of "<webhook-id>.<webhook-timestamp>.<body>">`
    keyed with `secret` (`whsec_<base64>`, default HITL_CALLBACK_SECRET), and the timestamp is within 5 minutes of
    now. `body` is the raw body as received; header names are compared without case. CallbackRefused otherwise."""
    secret = secret or os.environ.get("HITL_CALLBACK_SECRET")
    if not secret:
        raise ValueError("the callback secret: verify_callback(secret=...) or HITL_CALLBACK_SECRET")
    try:
        key = base64.b64decode(secret.removeprefix("whsec_"), validate=True)
    except binascii.Error:
        raise ValueError("a callback secret is whsec_ followed by base64") from None
    raw = body.encode() if isinstance(body, str) else body
    given = {name.lower(): value for name, value in headers.items()}
    message_id, timestamp = given.get("webhook-id", ""), given.get("webhook-timestamp", "")
    if not message_id or not timestamp.isdigit():
        raise CallbackRefused("no webhook-id or webhook-timestamp header")
    if abs((time.time() if now is None else now) - int(timestamp)) > CALLBACK_TOLERANCE_SECONDS:
        raise CallbackRefused("its webhook-timestamp is more than 5 minutes from now")
    expected = base64.b64encode(hmac.new(key, f"{message_id}.{timestamp}.".encode() + raw, hashlib.sha256).digest())
    signatures = [part.split(",", 1)[1].encode() for part in given.get("webhook-signature", "").split()
                  if part.startswith("v1,")]
    if not any(hmac.compare_digest(expected, signature) for signature in signatures):
        raise CallbackRefused("no webhook-signature matches the secret")
    payload: dict[str, Any] = json.loads(raw)
    return payload
