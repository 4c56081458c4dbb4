"""`GET /api/openapi.json`: the OpenAPI 3.1 contract of the REST API, generated from the pydantic models.

Each route is one row of ROUTES (path, method, body, query, answers by status); the JSON Schemas of every
body and answer come from pydantic in one pass, so shared models become shared components.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from importlib.metadata import version
from typing import Any

from flask import Blueprint, Response, jsonify
from pydantic import BaseModel, TypeAdapter
from pydantic.json_schema import JsonSchemaMode

from engine.protocol import ResponseBody

from .people import (
    GroupDeleted,
    GroupList,
    GroupOut,
    GroupUpdate,
    NewGroup,
    NewPerson,
    PersonDeleted,
    PersonList,
    PersonOut,
    PersonUpdate,
)
from .schemas import (
    Error,
    EventList,
    EventsHeaders,
    EventsQuery,
    ExternalInputRequest,
    Health,
    HistoryQuery,
    InputRequest,
    Me,
    MessagePosted,
    NewRequest,
    NewSession,
    PendingInbox,
    RequestDetail,
    RequestList,
    RequestQuery,
    RequestsQuery,
    ResponseResults,
    SessionCreated,
    SessionHistory,
    SessionInput,
    SessionList,
    SessionsQuery,
    StreamQuery,
    TurnCancelled,
)

bp = Blueprint("openapi", __name__)

REF = "#/components/schemas/{model}"
JSON = "application/json"
SSE = "text/event-stream"
PROMETHEUS = "text/plain; version=0.0.4"

ERRORS = {
    400: "Malformed body, unknown keys, or a bad query parameter (`limit` above 500 too)",
    401: "Missing or wrong API key",
    403: "Not a loopback client (or a Host or Origin not its own, or one a proxy forwards) while no API keys are "
         "set, (answers) a response the policy refused or an agent's key, (cancel) another person's turn or another "
         "agent's request, (new request) a user's key, or (metrics) a key that is not an operator's",
    404: "Unknown session or request, or one this key may not see (the same answer: docs/access.md); (people and "
         "groups) an unknown name, or a key that is not an operator's",
    409: "The request is no longer open, (cancel) the session has no turn to cancel or the request is an agent's in "
         "the gateway, (new request) its idempotency key was used with another body, or (people and groups) the "
         "name is taken or a principal is already another person's (`details.principal`)",
    413: "A body over 1 MiB",
    415: "A body not sent as `application/json`",
    422: "An option the request does not have, text where none is accepted, a blank message, an edited `input` that "
         "does not fit the request's `action.inputSchema` (`details.fields` names each field), an `input` for a "
         "request that is not editable or with another option than approve, (new session or request) a channel that "
         "is not configured or an address it cannot use, (new request) a field that does not fit, named in "
         "`details`, or (people and groups) a name, principal id or member that cannot be one (`details.field`)",
}
AUTH = (400, 401, 403)


@dataclass(frozen=True)
class Route:
    """One operation: answers maps a status to {media type: Python type whose JSON Schema describes it}."""

    path: str
    method: str
    summary: str
    answers: dict[int, dict[str, Any]]
    errors: tuple[int, ...] = AUTH
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    headers: type[BaseModel] | None = None
    public: bool = False
    notes: dict[int, str] = field(default_factory=dict)


OPERATORS = (*AUTH, 404)
"""People and groups are an operator's: any other key gets 404 on their routes (docs/access.md)."""
PEOPLE_ROUTES = (
    Route("/api/people", "post", "Name a person and link the principals they use (operator)",
          {201: {JSON: PersonOut}}, (*OPERATORS, 409, 422), body=NewPerson),
    Route("/api/people", "get", "Every person, by name (operator)", {200: {JSON: PersonList}}, OPERATORS),
    Route("/api/people/{name}", "get", "One person (operator)", {200: {JSON: PersonOut}}, OPERATORS),
    Route("/api/people/{name}", "put", "Replace a person's display name and principals (operator)",
          {200: {JSON: PersonOut}}, (*OPERATORS, 409, 422), body=PersonUpdate),
    Route("/api/people/{name}", "delete", "Delete a person: their principals count on their own again, and they "
          "leave their groups (operator)", {200: {JSON: PersonDeleted}}, OPERATORS),
    Route("/api/groups", "post", "Name a group of people and principals (operator)",
          {201: {JSON: GroupOut}}, (*OPERATORS, 409, 422), body=NewGroup),
    Route("/api/groups", "get", "Every group, by name (operator)", {200: {JSON: GroupList}}, OPERATORS),
    Route("/api/groups/{name}", "get", "One group (operator)", {200: {JSON: GroupOut}}, OPERATORS),
    Route("/api/groups/{name}", "put", "Replace a group's members (operator)",
          {200: {JSON: GroupOut}}, (*OPERATORS, 422), body=GroupUpdate),
    Route("/api/groups/{name}", "delete", "Delete a group (operator)", {200: {JSON: GroupDeleted}}, OPERATORS),
)

ROUTES = (
    Route("/api/me", "get", "Who this key acts as, and its role (operator, user or agent)", {200: {JSON: Me}}),
    Route("/api/sessions", "post", "Open a session; a message starts its first turn",
          {201: {JSON: SessionCreated}}, (*AUTH, 422), body=NewSession),
    Route("/api/sessions", "get", "Sessions this key sees, newest first, with their number of open requests",
          {200: {JSON: SessionList}}, query=SessionsQuery),
    Route("/api/sessions/{sessionId}/input", "post", "A message (answers, steers or queues), or answers to requests",
          {202: {JSON: MessagePosted | ResponseResults}}, (*AUTH, 404, 409, 422), body=SessionInput),
    Route("/api/sessions/{sessionId}/cancel", "post", "Cancel the session's current turn (queued, running or waiting)",
          {202: {JSON: TurnCancelled}}, (*AUTH, 404, 409), notes={202: "The turn was cancelled"}),
    Route("/api/sessions/{sessionId}", "get",
          "The history, a page of turns at a time: turns, runs, requests, tool calls, messages",
          {200: {JSON: SessionHistory}}, (*AUTH, 404), query=HistoryQuery),
    Route("/api/sessions/{sessionId}/events", "get", "The session's events after `seq`, in order",
          {200: {JSON: EventList, SSE: str}}, (*AUTH, 404), query=EventsQuery, headers=EventsHeaders,
          notes={200: "JSON, or with `Accept: text/event-stream` a live stream of the same events"}),
    Route("/api/requests", "get", "The inbox: the input requests this key is asked (an operator's: all), oldest first",
          {200: {JSON: RequestList}}, query=RequestsQuery),
    Route("/api/inbox/events", "get", "Which requests the inbox's first page of pending ones holds",
          {200: {JSON: PendingInbox, SSE: str}}, query=StreamQuery,
          notes={200: "JSON, or with `Accept: text/event-stream` a live stream: an `inbox` event with the same "
                      "document at once and whenever it changes (a request opens or closes)"}),
    Route("/api/requests", "post", "An agent running elsewhere asks people: a tool approval or a question",
          {201: {JSON: ExternalInputRequest}, 200: {JSON: ExternalInputRequest}}, (*AUTH, 409, 422), body=NewRequest,
          notes={201: "Opened", 200: "The request this idempotency key opened before, as it is now"}),
    Route("/api/requests/{requestId}", "get", "One input request; with `wait`, a long-poll until it closes",
          {200: {JSON: RequestDetail | ExternalInputRequest}}, (*AUTH, 404), query=RequestQuery,
          notes={200: "The request (an external one with its approvers, metadata and callback)"}),
    Route("/api/requests/{requestId}/cancel", "post", "Close an external request `cancelled` (its agent, or an "
          "operator)", {200: {JSON: ExternalInputRequest}}, (*AUTH, 404, 409)),
    Route("/api/requests/{requestId}", "patch", "Answer one input request",
          {200: {JSON: InputRequest}, 202: {JSON: InputRequest}}, (*AUTH, 404, 409, 422), body=ResponseBody,
          notes={200: "Settled by this response", 202: "Recorded; a response policy waits for more responses"}),
    *PEOPLE_ROUTES,
    Route("/api/openapi.json", "get", "This document", {200: {JSON: dict[str, Any]}}, (), public=True),
    Route("/healthz", "get", "The database, and Redis when configured",
          {200: {JSON: Health}, 503: {JSON: Health}}, (), public=True, notes={503: "A check failed"}),
    Route("/metrics", "get", "Prometheus metrics, computed from the database on each scrape",
          {200: {PROMETHEUS: str}}, (401, 403)),
)


@bp.get("/api/openapi.json")
def openapi_json() -> Response:
    return jsonify(document())


@cache
def document() -> dict[str, Any]:
    schemas, components = generate_schemas()
    paths: dict[str, dict[str, Any]] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method] = operation(route, schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "hitl-gateway", "version": version("hitl-gateway"),
            "description": "Agent turns that pause durably for people. JSON in camelCase; errors are "
            "`{error: {code, message, details?}}`. Without HITL_API_KEYS, loopback clients need no key. A key "
            "of the user or agent role sees only its own sessions and requests; anything else is a 404.",
        },
        "paths": paths,
        "components": {
            "schemas": components,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer", "description": "an HITL_API_KEYS key"}},
        },
        "security": [{"bearer": []}],
    }


SchemaKey = tuple[str, JsonSchemaMode]


def generate_schemas() -> tuple[dict[SchemaKey, dict[str, Any]], dict[str, Any]]:
    """The JSON Schema (a `$ref` for models) of every body and answer, and the shared components."""
    inputs: dict[SchemaKey, Any] = {(repr(Error), "serialization"): Error}
    for route in ROUTES:
        if route.body is not None:
            inputs[(repr(route.body), "validation")] = route.body
        for content in route.answers.values():
            for annotation in content.values():
                inputs[(repr(annotation), "serialization")] = annotation
    schemas, defs = TypeAdapter.json_schemas(
        [(name, mode, TypeAdapter(annotation)) for (name, mode), annotation in inputs.items()],
        by_alias=True, ref_template=REF,
    )
    return schemas, defs.get("$defs", {})


def operation(route: Route, schemas: dict[SchemaKey, dict[str, Any]]) -> dict[str, Any]:
    responses: dict[str, Any] = {}
    for status, content in route.answers.items():
        responses[str(status)] = {
            "description": route.notes.get(status, "OK"),
            "content": {media: {"schema": schemas[(repr(t), "serialization")]} for media, t in content.items()},
        }
    error = {"schema": schemas[(repr(Error), "serialization")]}
    for status in (*route.errors, *((413, 415) if route.body is not None else ())):  # every body is JSON
        responses[str(status)] = {"description": ERRORS[status], "content": {JSON: error}}
    op: dict[str, Any] = {
        "operationId": operation_id(route), "summary": route.summary,
        "parameters": [*path_parameters(route.path), *parameters(route.query, "query"),
                       *parameters(route.headers, "header")],
        "responses": responses,
    }
    if route.body is not None:
        op["requestBody"] = {"required": True,
                             "content": {JSON: {"schema": schemas[(repr(route.body), "validation")]}}}
    if route.public:
        op["security"] = []
    return op


def operation_id(route: Route) -> str:
    """`get /api/sessions/{sessionId}/events` -> `getSessionsBySessionIdEvents`."""
    words = re.findall(r"\{?[A-Za-z]+", route.path.removeprefix("/api"))
    return route.method + "".join("By" + w[1].upper() + w[2:] if w[0] == "{" else w.capitalize() for w in words)


def path_parameters(path: str) -> list[dict[str, Any]]:
    return [{"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for name in re.findall(r"\{([^}]+)\}", path)]


def parameters(model: type[BaseModel] | None, location: str) -> list[dict[str, Any]]:
    """One query (or header) parameter per field of `model`, its JSON Schema inlined."""
    if model is None:
        return []
    schema = TypeAdapter(model).json_schema(by_alias=True, ref_template=REF)
    required = set(schema.get("required", []))
    parameters = []
    for name, prop in schema["properties"].items():
        prop = {k: v for k, v in prop.items() if k != "title"}
        description = prop.pop("description", None)
        parameter = {"name": name, "in": location, "required": name in required, "schema": prop}
        if description:
            parameter["description"] = description
        parameters.append(parameter)
    return parameters
