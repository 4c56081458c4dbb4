"""schemathesis over `/api/openapi.json`, on PostgreSQL with Redis and a worker: calls generated for every operation
(valid ones, and invalid ones where something can be invalid; with made-up ids and with ids that exist), a bounded
number per operation, get no server error and only the answers the contract documents. Every call is alice's."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.generation import GenerationMode

from gateway.openapi import ROUTES, Route
from tests.conftest import API_KEYS
from tests.reliability.conftest import Deployment, deployment
from tests.support.agent import script

EXAMPLES = 30
"""Generated calls per operation (at most: hypothesis stops early where it runs out of new ones)."""
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
REFUND = script([("refund", {"charge_id": "ch_1", "amount": 20})])
ALICE = {"Authorization": "Bearer " + next(key for key, who in API_KEYS.items() if who == "alice")}


@pytest.fixture(scope="module")
def fuzzed(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
           redis_url: str) -> Iterator[Deployment]:
    """One deployment for every operation's calls (the sessions they make pile up, as on a live gateway)."""
    with deployment(request, tmp_path_factory.mktemp("fuzzed"), redis_url) as built:
        built.start_worker()
        yield built


def strategy(operation: schemathesis.APIOperation, route: Route,
             known: dict[str, str]) -> st.SearchStrategy[schemathesis.Case]:
    """Valid calls, and invalid ones where something can be invalid; with made-up ids and with ids that exist."""
    modes = list(GenerationMode) if route.body or route.query or route.headers else [GenerationMode.POSITIVE]
    path_parameters = {name: known[name] for name in re.findall(r"\{([^}]+)\}", route.path)}
    ids_choices = [{}, path_parameters] if path_parameters else [{}]
    return st.one_of([operation.as_strategy(mode, path_parameters=ids) for mode in modes for ids in ids_choices]) \
        .map(no_long_wait)


def no_long_wait(case: schemathesis.Case) -> schemathesis.Case:
    """A valid `wait` becomes 0: a long-poll of the pending request would hold each call up to a minute."""
    if isinstance(case.query, dict) and type(case.query.get("wait")) is int and 0 < case.query["wait"] <= 60:
        case.query["wait"] = 0
    return case


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.method.upper()} {route.path}")
def test_fuzzed_calls_get_no_server_error_and_only_documented_answers(fuzzed: Deployment, route: Route) -> None:
    stack = fuzzed.stack
    contract = schemathesis.openapi.from_wsgi("/api/openapi.json", stack.app)
    sid, _ = stack.start(REFUND)
    [request] = stack.pending(sid)
    known = {"sessionId": sid, "requestId": request["requestId"], "name": "fuzzed"}  # (people and groups: alice,
    # a user, is answered 404 for every name, as for anything an operator's alone)

    @given(case=strategy(contract[route.path][route.method.upper()], route, known))
    @settings(max_examples=EXAMPLES, deadline=5000, suppress_health_check=list(HealthCheck), database=None)
    def call(case: schemathesis.Case) -> None:
        case.call_and_validate(headers=ALICE, checks=CHECKS)

    call()
