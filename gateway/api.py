"""The REST API (`/api`): sessions, their input, history and events; the request inbox; requests of agents that
run elsewhere (docs/agents-anywhere.md)."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request

from engine.answers.conversation import cancel_turn, post_message
from engine.answers.external import cancel_external_request, open_external_request
from engine.answers.submit import submit_responses
from engine.jobs.runtime import Runtime
from engine.protocol import InputResponse, ResponseBody
from engine.store.queries import (
    events_after,
    get_request,
    list_requests,
    list_sessions,
    pending_inbox,
    require_seen,
    session_history,
)
from engine.store.statuses import RequestStatus
from engine.turns.sessions import open_session

from . import stream
from .auth import current_caller
from .errors import ApiError, invalid_query
from .external import parse_new_request, place
from .schemas import MAX_PAGE, MAX_WAIT, PAGE, NewSession, SessionInput, page_limit, query_int

bp = Blueprint("api", __name__, url_prefix="/api")

def runtime() -> Runtime:
    rt: Runtime = current_app.extensions["hitl"]
    return rt


def body() -> dict[str, Any]:
    if not request.is_json:  # curl -d sends a form, even of JSON: say what to send instead of "not JSON"
        raise ApiError(415, "unsupported_media_type", "send the body as JSON, with Content-Type: application/json",
                       {"contentType": request.mimetype or None})
    data = json_body()
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    return data


def int_arg(name: str, default: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    value = query_int(raw)
    if value is None:
        raise invalid_query(name)
    return value


def limit_arg() -> int:
    """`?limit=`: a page of at most MAX_PAGE rows (PAGE when not given)."""
    raw = request.args.get("limit")
    if raw is None:
        return PAGE
    value = page_limit(raw)
    if value is None:
        raise invalid_query("limit", MAX_PAGE)
    return value


def json_body() -> Any:
    """The body as JSON, None when it is not JSON; nested deeper than the parser goes is a 400, not a 500
    (a body over the limit is a 413: gateway.body_limit)."""
    try:
        return request.get_json(silent=True)
    except RecursionError:
        raise ApiError(400, "invalid_json", "the request body is nested too deeply") from None


def has_nul(value: Any) -> bool:
    """Whether any string in `value` (keys too) holds a NUL; a loop, as a body may nest as deep as JSON goes."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and "\x00" in item:
            return True
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


@bp.before_request
def refuse_nul_characters() -> None:
    """PostgreSQL text cannot hold NUL: ids, queries and bodies carrying one are a 400 on every database."""
    if has_nul([request.view_args or {}, request.args.to_dict(flat=False), json_body()]):
        raise ApiError(400, "invalid_text", "text may not contain NUL (\\u0000) characters")


@bp.get("/me")
def me() -> Response:
    """Who this key acts as, and its role: what the console says it is acting as."""
    caller = current_caller()
    return jsonify({"principal": caller.principal.wire(), "role": caller.role})


@bp.post("/sessions")
def create_session() -> tuple[Response, int]:
    principal = current_caller().principal
    payload = NewSession.model_validate(body(), by_alias=True, by_name=False)
    channel, address = "api", None
    if payload.channel is not None:
        channel, address = place(runtime(), payload.channel, payload.address or {})
    opened = open_session(runtime(), principal, channel=channel, address=address, message=payload.message)
    result: dict[str, Any] = {"id": opened.session_id}
    if opened.turn_id:
        result["turnId"] = opened.turn_id
    return jsonify(result), 201


@bp.get("/sessions")
def sessions() -> Response:
    caller = current_caller()
    return jsonify(list_sessions(runtime(), limit=limit_arg(), before=request.args.get("before"),
                                 seen_by=caller.seen_by))


@bp.post("/sessions/<session_id>/input")
def session_input(session_id: str) -> tuple[Response, int]:
    caller = current_caller()
    principal = caller.principal
    payload = SessionInput.model_validate(body(), by_alias=True, by_name=False)
    require_seen(runtime(), caller.seen_by, session_id=session_id)
    if payload.message is not None:
        posted = post_message(runtime(), session_id, principal, payload.message, payload.turn_policy or "steer")
        return jsonify({"turnId": posted.turn_id, "effect": posted.effect,
                        "results": [r.wire() for r in posted.results]}), 202
    results = submit_responses(runtime(), principal, payload.input_responses or [], session_id=session_id)
    return jsonify({"results": [r.wire() for r in results]}), 202


@bp.post("/sessions/<session_id>/cancel")
def cancel(session_id: str) -> tuple[Response, int]:
    """Cancel the session's current turn, queued, running or waiting (409 when there is none)."""
    caller = current_caller()
    require_seen(runtime(), caller.seen_by, session_id=session_id)
    return jsonify({"turnId": cancel_turn(runtime(), session_id, caller.principal)}), 202


@bp.get("/sessions/<session_id>")
def session(session_id: str) -> Response:
    """The latest turns of the session's history, or those before turn `before`; `next` pages further back."""
    return jsonify(session_history(runtime(), session_id, current_caller().seen_by, before=request.args.get("before")))


@bp.get("/sessions/<session_id>/events")
def events(session_id: str) -> Response:
    """`{events: [...]}`, or a live Server-Sent Events stream when the client accepts text/event-stream."""
    if stream.wants_event_stream():
        return stream.event_stream(session_id)
    caller = current_caller()
    return jsonify({"events": events_after(runtime(), session_id, int_arg("after", 0), seen_by=caller.seen_by)})


@bp.get("/inbox/events")
def inbox_events() -> Response:
    """Which requests the inbox's first page of pending ones holds (`{requestIds, next}`), or a live stream of it
    (an `inbox` frame whenever it changes) when the client accepts text/event-stream."""
    if stream.wants_event_stream():
        return stream.inbox_stream()
    return jsonify(pending_inbox(runtime(), PAGE, current_caller().seen_by))


@bp.get("/requests")
def requests_inbox() -> Response:
    caller = current_caller()
    status = request.args.get("status")
    if status is not None and status not in tuple(RequestStatus):
        raise ApiError(400, "invalid_query", "`status` is pending or resolved", {"parameter": "status"})
    return jsonify(list_requests(runtime(), status=status, session_id=request.args.get("sessionId"),
                                 limit=limit_arg(), after=request.args.get("after"), seen_by=caller.seen_by))


@bp.post("/requests")
def create_request() -> tuple[Response, int]:
    """An agent running elsewhere asks people: 201 with the request, or 200 with the one its idempotency key made."""
    caller = current_caller()
    caller.require(("agent", "operator"), "only an agent's or an operator's key opens requests")
    opened = open_external_request(runtime(), caller.principal, parse_new_request(runtime(), body()))
    return jsonify(opened.request), 201 if opened.created else 200


@bp.get("/requests/<request_id>")
def one_request(request_id: str) -> Response:
    """The request; with `wait=N` (up to 60), as soon as it is no longer pending, or after N seconds."""
    caller = current_caller()
    raw = request.args.get("wait")
    wait = 0 if raw is None else query_int(raw)
    if wait is None or wait > MAX_WAIT:
        raise invalid_query("wait", MAX_WAIT)
    if wait:
        return stream.long_poll(request_id, wait, caller.seen_by)
    return jsonify(get_request(runtime(), request_id, caller.seen_by))


@bp.post("/requests/<request_id>/cancel")
def cancel_request(request_id: str) -> Response:
    """Close an external request `cancelled` (its agent, or an operator)."""
    caller = current_caller()
    require_seen(runtime(), caller.seen_by, request_id=request_id)
    return jsonify(cancel_external_request(runtime(), request_id, caller.principal))


@bp.patch("/requests/<request_id>")
def answer_request(request_id: str) -> tuple[Response, int]:
    """200 when this response settled it, 202 when a response policy waits for more, 403 refused, 409 closed."""
    caller = current_caller()
    answer = ResponseBody.model_validate(body(), by_alias=True, by_name=False)
    require_seen(runtime(), caller.seen_by, request_id=request_id)
    response = InputResponse(request_id=request_id, option_id=answer.option_id, text=answer.text, input=answer.input)
    [result] = submit_responses(runtime(), caller.principal, [response])
    if result.status == "settled":
        return jsonify(result.request.wire()), 200
    if result.status == "pending":
        return jsonify(result.request.wire()), 202
    if result.status == "refused":
        raise ApiError(403, "response_refused", result.reason or "refused", {"requestId": request_id})
    raise ApiError(409, "request_closed", f"request {request_id} is no longer open", {"requestId": request_id})
