"""The console's channel: the REST API the web console uses, as the contract driver."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.conftest import Stack, make_stack
from tests.contract.driver import Shown


@contextmanager
def driver(request: pytest.FixtureRequest, kind: str, tmp_path: Path) -> Iterator[ApiDriver]:
    with make_stack(request, kind, tmp_path) as stack:
        yield ApiDriver(stack)


class ApiDriver:
    name = "console"

    def __init__(self, stack: Stack) -> None:
        self.stack = stack
        self.refusals: dict[str, list[str]] = {}

    def open(self, message: str, who: str) -> str:
        response = self.stack.client(who).post("/api/sessions", json={"message": message})
        assert response.status_code == 201, response.get_json()
        self.stack.wait_idle()
        return str(response.get_json()["id"])

    def shown(self, session_id: str) -> list[Shown]:
        history = self.stack.client("alice").get(f"/api/sessions/{session_id}").get_json()
        requests = [r for t in history["turns"] for r in t["requests"]]
        shown = []
        for r in requests:
            answered = ""
            if r["status"] == "resolved":
                answered = f"{r['outcome']} by {(r['responder'] or {}).get('principalId')}"
            shown.append(Shown(r["requestId"], f"{r['prompt']} {answered}".strip(),
                               [o["label"] for o in r["options"]], r["status"] == "pending"))
        return shown

    def press(self, session_id: str, request_id: str, option_id: str, who: str) -> None:
        response = self.stack.client(who).patch(f"/api/requests/{request_id}", json={"optionId": option_id})
        if response.status_code in (403, 404):  # refused, or (another's) not theirs to see
            self.refusals.setdefault(who, []).append(response.get_json()["error"]["message"])
        self.stack.wait_idle()

    def type(self, session_id: str, text: str, who: str) -> None:
        response = self.stack.client(who).post(f"/api/sessions/{session_id}/input", json={"message": text})
        assert response.status_code == 202, response.get_json()
        for result in response.get_json().get("results", []):
            if result["status"] == "refused":
                self.refusals.setdefault(who, []).append(result["reason"])
        self.stack.wait_idle()

    def told(self, session_id: str, who: str) -> list[str]:
        return self.refusals.get(who, [])
