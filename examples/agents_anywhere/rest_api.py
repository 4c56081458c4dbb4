"""The request API with nothing but HTTP: ask people to approve a refund, then long-poll until they settle it.

    HITL_URL=http://127.0.0.1:8000 HITL_API_KEY=<an agent's key> python -m examples.agents_anywhere.rest_api

An approver answers in the console, with `hitl answer <request id> approve`, or with
`curl -X PATCH $HITL_URL/api/requests/<request id> -d '{"optionId": "approve"}'` and their own key.
"""

from __future__ import annotations

import os
from typing import Any

import requests


def ask_and_wait(url: str, key: str, charge_id: str, amount: float) -> dict[str, Any]:
    """Open a tool approval, then long-poll (60 s at a time) until it closes; returns the closed request."""
    http = requests.Session()
    http.headers["Authorization"] = f"Bearer {key}"
    opened = http.post(f"{url}/api/requests", json={
        "kind": "tool-approval",
        "action": {"kind": "tool-call", "toolName": "refund_charge",
                   "input": {"charge_id": charge_id, "amount": amount}},
        "expiresIn": 3600,
        "idempotencyKey": f"refund-{charge_id}-{amount}",  # running this again finds the same request
    }, timeout=30)
    opened.raise_for_status()
    request: dict[str, Any] = opened.json()
    print(f"asked: {request['prompt']} ({request['requestId']})")
    while request["status"] == "pending":
        polled = http.get(f"{url}/api/requests/{request['requestId']}", params={"wait": 60}, timeout=90)
        polled.raise_for_status()
        request = polled.json()
    return request


def main() -> None:
    closed = ask_and_wait(os.environ.get("HITL_URL", "http://127.0.0.1:8000"), os.environ.get("HITL_API_KEY", ""),
                          "ch_1001", 20.0)
    who = (closed["responder"] or {}).get("principalId", "nobody")
    print(f"{closed['outcome']} by {who}")
    if closed["outcome"] == "approved":
        print("refunding 20.00 on ch_1001")


if __name__ == "__main__":
    main()
