"""The Python client: a question, then a refund behind `@require_approval`.

    HITL_URL=http://127.0.0.1:8000 HITL_API_KEY=<an agent's key> python -m examples.agents_anywhere.client_agent

Each call blocks until a person answers (in the console, or on the Slack channel, SMS number or GitHub issue
given as `to`), or raises Expired after its timeout.
"""

from __future__ import annotations

from gateway.client import Denied, Expired, HitlClient


def run(hitl: HitlClient, charge_id: str = "ch_1001", amount: float = 20.0) -> str:
    """Ask which plan to move the customer to, then refund once someone approves; what happened, in words."""

    @hitl.require_approval(timeout=600)
    def refund_charge(charge_id: str, amount: float) -> str:
        return f"refunded {amount:.2f} on {charge_id}"  # the real side effect goes here

    plan = hitl.ask("Which plan should the customer move to?", options=["Basic", "Pro"], timeout=600)
    try:
        done = refund_charge(charge_id, amount)
    except Denied as denied:
        return f"plan {plan.label or plan.text}; refund denied: {denied.note or 'no reason given'}"
    except Expired:
        return f"plan {plan.label or plan.text}; nobody approved the refund in time"
    return f"plan {plan.label or plan.text}; {done}"


def main() -> None:
    print(run(HitlClient()))  # HITL_URL and HITL_API_KEY from the environment


if __name__ == "__main__":
    main()
