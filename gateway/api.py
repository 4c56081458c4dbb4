"""The REST API (`/api`): sessions, their input, history and events; the request inbox."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, current_app, jsonify, request
from pydantic import Field, model_validator

from engine.protocol import InputResponse, ResponseBody, StrictWireModel
from engine.queries import events_after, get_request, list_requests, list_sessions, session_history
from engine.responses import submit_responses
from engine.runtime import Runtime
from engine.sessions import open_session, post_message

from .auth import current_principal
from .errors import ApiError

bp = Blueprint("api", __name__, url_prefix="/api")


class NewSession(StrictWireModel):
    message: str | None = Field(None, min_length=1)


class SessionInput(StrictWireModel):
    message: str | None = Field(None, min_length=1)
    input_responses: list[InputResponse] | None = Field(None, min_length=1)

    @model_validator(mode="after")
    def _exactly_one(self) -> SessionInput:
        if (self.message is None) == (self.input_responses is None):
            raise ValueError("send exactly one of message or inputResponses")
        return self


def runtime() -> Runtime:
    rt: Runtime = current_app.extensions["hitl"]
    return rt


def body() -> dict[str, Any]:
    data = request.get_json(silent=True)
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_json", "the request body must be a JSON object")
    return data


def int_arg(name: str, default: int) -> int:
    raw = request.args.get(name)
    if raw is None:
        return default
    if not raw.isdigit():
        raise ApiError(400, "invalid_query", f"`{name}` must be a non-negative integer", {"parameter": name})
    return int(raw)


@bp.post("/sessions")
def create_session() -> tuple[Response, int]:
    principal = current_principal()
    payload = NewSession.model_validate(body())
    opened = open_session(runtime(), principal, message=payload.message)
    result: dict[str, Any] = {"id": opened.session_id}
    if opened.turn_id:
        result["turnId"] = opened.turn_id
    return jsonify(result), 201


@bp.get("/sessions")
def sessions() -> Response:
    current_principal()
    return jsonify({"sessions": list_sessions(runtime(), limit=int_arg("limit", 100))})


@bp.post("/sessions/<session_id>/input")
def session_input(session_id: str) -> tuple[Response, int]:
    principal = current_principal()
    payload = SessionInput.model_validate(body())
    if payload.message is not None:
        turn_id = post_message(runtime(), session_id, principal, payload.message)
        return jsonify({"turnId": turn_id}), 202
    results = submit_responses(runtime(), principal, payload.input_responses or [], session_id=session_id)
    return jsonify({"results": [r.wire() for r in results]}), 202


@bp.get("/sessions/<session_id>")
def session(session_id: str) -> Response:
    current_principal()
    return jsonify(session_history(runtime(), session_id))


@bp.get("/sessions/<session_id>/events")
def events(session_id: str) -> Response:
    current_principal()
    return jsonify({"events": events_after(runtime(), session_id, int_arg("after", 0))})


@bp.get("/requests")
def requests_inbox() -> Response:
    current_principal()
    status = request.args.get("status")
    if status not in (None, "pending", "resolved"):
        raise ApiError(400, "invalid_query", "`status` is pending or resolved", {"parameter": "status"})
    return jsonify({"requests": list_requests(runtime(), status=status, session_id=request.args.get("sessionId"))})


@bp.get("/requests/<request_id>")
def one_request(request_id: str) -> Response:
    current_principal()
    return jsonify(get_request(runtime(), request_id))


@bp.patch("/requests/<request_id>")
def answer_request(request_id: str) -> tuple[Response, int]:
    """200 when this response settled it, 202 when a response policy waits for more, 403 refused, 409 closed."""
    principal = current_principal()
    answer = ResponseBody.model_validate(body())
    response = InputResponse(request_id=request_id, option_id=answer.option_id, text=answer.text)
    [result] = submit_responses(runtime(), principal, [response])
    if result.status == "settled":
        return jsonify(result.request.wire()), 200
    if result.status == "pending":
        return jsonify(result.request.wire()), 202
    if result.status == "refused":
        raise ApiError(403, "response_refused", result.reason or "refused", {"requestId": request_id})
    raise ApiError(409, "request_closed", f"request {request_id} is no longer open", {"requestId": request_id})
