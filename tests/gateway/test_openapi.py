"""The OpenAPI 3.1 contract at /api/openapi.json: valid, complete, and true of the running app.

The app runs on SQLite with in-process jobs and API keys; every call is alice's. Real answers of a refund
flow are checked against the documented shapes; schemathesis fuzzes every operation in the reliability suite
(tests/reliability/test_api_fuzz.py).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from werkzeug.test import TestResponse

from tests.conftest import Stack, sqlite_settings
from tests.support.agent import script

REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])


@pytest.fixture
def app_stack(tmp_path: Path) -> Iterator[Stack]:
    stack = Stack("sqlite", sqlite_settings(tmp_path))
    yield stack
    stack.close()


@pytest.fixture
def contract(app_stack: Stack) -> schemathesis.BaseSchema:
    """The contract as the app serves it, bound to the app (calls go through WSGI, in-process)."""
    return schemathesis.openapi.from_wsgi("/api/openapi.json", app_stack.app)


def route_shape(path: str) -> str:
    """`/api/sessions/<session_id>` and `/api/sessions/{sessionId}` -> `/api/sessions/{}`."""
    return re.sub(r"<[^>]+>|\{[^}]+\}", "{}", path)


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from refs(item)


def test_the_contract_is_valid_openapi_3_1_served_without_a_key(app_stack: Stack,
                                                                 contract: schemathesis.BaseSchema) -> None:
    response = app_stack.client(None).get("/api/openapi.json")

    assert response.status_code == 200
    document = response.get_json()
    assert document["openapi"] == "3.1.0"
    contract.validate()  # against the OpenAPI 3.1 meta-schema
    components = document["components"]["schemas"]
    assert {ref.removeprefix("#/components/schemas/") for ref in refs(document)} <= set(components)
    assert document["components"]["securitySchemes"]["bearer"] == {
        "type": "http", "scheme": "bearer", "description": "an HITL_API_KEYS key"}
    assert set(components["InputRequest"]["required"]) >= {"requestId", "sessionId", "kind", "allowFreeform"}
    assert components["Error"]["properties"]["error"] == {"$ref": "#/components/schemas/ErrorDetail"}


def test_every_route_of_the_app_is_documented_and_nothing_else(app_stack: Stack) -> None:
    document = app_stack.client(None).get("/api/openapi.json").get_json()
    documented = {(route_shape(path), method.upper()) for path, ops in document["paths"].items() for method in ops}
    served = {
        (route_shape(rule.rule), method)
        for rule in app_stack.app.url_map.iter_rules()
        if rule.rule.startswith(("/api/", "/healthz", "/metrics"))
        for method in rule.methods or ()
        if method not in ("HEAD", "OPTIONS")
    }
    assert documented == served


def test_real_answers_of_a_refund_flow_match_the_contract(app_stack: Stack,
                                                          contract: schemathesis.BaseSchema) -> None:
    client, anonymous = app_stack.client("alice"), app_stack.client(None)

    def conforms(method: str, template: str, response: TestResponse, status: int) -> None:
        """The answer has this status and the content type and shape documented for it."""
        assert response.status_code == status, response.get_data(as_text=True)
        contract[template][method].validate_response(response)

    created = client.post("/api/sessions", json={"message": REFUND})
    conforms("POST", "/api/sessions", created, 201)
    sid = created.get_json()["id"]
    app_stack.wait_idle()
    inbox = client.get("/api/requests?status=pending")
    conforms("GET", "/api/requests", inbox, 200)
    [request] = inbox.get_json()["requests"]
    rid = request["requestId"]
    one = f"/api/requests/{rid}"
    conforms("GET", "/api/requests/{requestId}", client.get(one), 200)
    conforms("PATCH", "/api/requests/{requestId}", client.patch(one, json={"optionId": "bogus"}), 422)
    conforms("PATCH", "/api/requests/{requestId}", client.patch(one, json={"optionId": "approve"}), 200)
    conforms("PATCH", "/api/requests/{requestId}", client.patch(one, json={"optionId": "approve"}), 409)
    app_stack.wait_idle()
    history = client.get(f"/api/sessions/{sid}")
    conforms("GET", "/api/sessions/{sessionId}", history, 200)
    assert [r["status"] for r in history.get_json()["turns"][0]["runs"]] == ["interrupted", "succeeded"]
    conforms("GET", "/api/sessions/{sessionId}/events", client.get(f"/api/sessions/{sid}/events?after=2"), 200)
    conforms("GET", "/api/sessions", client.get("/api/sessions"), 200)
    typed = client.post(f"/api/sessions/{sid}/input", json={"message": REFUND})
    conforms("POST", "/api/sessions/{sessionId}/input", typed, 202)
    app_stack.wait_idle()
    [second] = app_stack.pending(sid)
    answers = client.post(f"/api/sessions/{sid}/input",
                          json={"inputResponses": [{"requestId": second["requestId"], "optionId": "cancel"}]})
    conforms("POST", "/api/sessions/{sessionId}/input", answers, 202)
    assert answers.get_json()["results"][0]["status"] == "settled"
    app_stack.wait_idle()
    conforms("POST", "/api/sessions/{sessionId}/cancel", client.post(f"/api/sessions/{sid}/cancel"), 409)
    earlier = client.get(f"/api/sessions/{sid}?before={second['turnId']}")
    conforms("GET", "/api/sessions/{sessionId}", earlier, 200)
    assert [t["seq"] for t in earlier.get_json()["turns"]] == [1]
    conforms("GET", "/api/sessions/{sessionId}", client.get(f"/api/sessions/{sid}?before=turn_nope"), 400)
    conforms("GET", "/api/sessions/{sessionId}", client.get("/api/sessions/ses_nope"), 404)
    conforms("GET", "/api/sessions", anonymous.get("/api/sessions"), 401)
    conforms("GET", "/healthz", anonymous.get("/healthz"), 200)
    conforms("GET", "/metrics", client.get("/metrics"), 403)  # a user's key: only an operator's reads them
    conforms("GET", "/metrics", app_stack.client("bob:operator").get("/metrics"), 200)
    conforms("GET", "/api/me", client.get("/api/me"), 200)


@pytest.mark.parametrize("path", ["/api/sessions/ses_%00", "/api/requests?sessionId=ses_%00"])
def test_a_nul_character_in_an_id_is_a_400_on_every_database(stack: Stack, path: str) -> None:
    response = stack.client().get(path)

    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_text"


def test_a_nul_character_in_a_message_is_a_400_and_starts_nothing(stack: Stack) -> None:
    client = stack.client()

    response = client.post("/api/sessions", json={"message": "refund\u0000 please"})

    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "invalid_text"
    assert client.get("/api/sessions").get_json()["sessions"] == []
