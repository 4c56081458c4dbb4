"""Errors become HTTP here, at the edge, and only here: JSON `{error: {code, message, details?}}`."""

from __future__ import annotations

import logging
from typing import Any

from flask import Flask, Response, jsonify
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from engine.errors import (
    Conflict,
    EngineError,
    IdempotencyConflict,
    InvalidInput,
    InvalidQuery,
    NotFound,
    NotPermitted,
    RequestClosed,
    ResponseRefused,
)

from .schemas import MAX_QUERY_INT

log = logging.getLogger(__name__)

STATUS = {InvalidQuery: 400, NotFound: 404, InvalidInput: 422, RequestClosed: 409, ResponseRefused: 403,
          NotPermitted: 403, Conflict: 409, IdempotencyConflict: 409}


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str, details: Any = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.details = status, code, message, details


def invalid_query(name: str, maximum: int = MAX_QUERY_INT) -> ApiError:
    """A query parameter (or the header standing for one) that is not an integer from 0 to `maximum`."""
    return ApiError(400, "invalid_query", f"`{name}` must be an integer from 0 to {maximum}", {"parameter": name})


def field_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """Each error of a body's validation as (its field's dotted camelCase path, what is wrong)."""
    return [(".".join(str(part) for part in e["loc"]), e["msg"]) for e in exc.errors(include_url=False)]


def error_response(status: int, code: str, message: str, details: Any = None) -> tuple[Response, int]:
    error: dict[str, Any] = {"code": code, "message": message}
    if details:
        error["details"] = details
    return jsonify({"error": error}), status


def init_app(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api_error(exc: ApiError) -> tuple[Response, int]:
        return error_response(exc.status, exc.code, exc.message, exc.details)

    @app.errorhandler(EngineError)
    def _engine_error(exc: EngineError) -> tuple[Response, int]:
        return error_response(STATUS.get(type(exc), 400), exc.code, exc.message, exc.details)

    @app.errorhandler(ValidationError)
    def _validation_error(exc: ValidationError) -> tuple[Response, int]:
        details = [{"field": field, "problem": problem} for field, problem in field_problems(exc)]
        return error_response(400, "invalid_body", "the request body does not fit the expected shape", details)

    @app.errorhandler(HTTPException)
    def _http_error(exc: HTTPException) -> tuple[Response, int]:
        code = (exc.name or "error").lower().replace(" ", "_")
        return error_response(exc.code or 500, code, exc.description or exc.name)

    @app.errorhandler(Exception)
    def _bug(exc: Exception) -> tuple[Response, int]:
        log.exception("unhandled error")
        return error_response(500, "internal_error", "the gateway failed; the error is in its log")
