"""A two-person rule: a payout runs once two different people approved it; any one of them may deny it."""

from __future__ import annotations

import re
from typing import Any

from engine import Agent, ApprovalPolicy, ResponseContext, ToolCallRequest, ToolContext, always, tool
from examples.scripted import one_call


def two_people(ctx: ResponseContext) -> dict[str, str]:
    """Approve: pending until a second, different person approves too. Deny: settles at once."""
    if ctx.response.decision != "approve":
        return {"status": "allowed"}
    others = [c for c in ctx.candidates if c.decision == "approve" and not c.responder.same_as(ctx.response.responder)]
    return {"status": "allowed"} if others else {"status": "pending"}


@tool(approval=ApprovalPolicy(request=always(expires_in=24 * 3600), response=two_people), title="payout")
def send_payout(ctx: ToolContext, account: str, amount: float) -> dict[str, Any]:
    """Send money to an account. Two people approve it first."""
    second = ctx.approval.responder.display_name if ctx.approval else None
    return {"payoutId": f"po_{ctx.call_id[-8:]}", "account": account, "amount": amount, "secondApprover": second}


def payout(text: str) -> ToolCallRequest | None:
    """`pay $250 to acct_42` -> send_payout(account="acct_42", amount=250.0)."""
    account, amount = re.search(r"\bacct_\w+", text), re.search(r"\$(\d+(?:\.\d{1,2})?)", text)
    if account is None or amount is None:
        return None
    return ToolCallRequest("send_payout", {"account": account.group(0), "amount": float(amount.group(1))})


agent = Agent(
    name="payouts",
    instructions="You send payouts. Two people approve each one.",
    model=one_call(payout, lambda r: f"Sent {r['amount']:.2f} to {r['account']} ({r['payoutId']}), "
                                     f"approved by two people, the second {r['secondApprover']}.",
                   usage='Try "pay $250 to acct_42": two different people must approve it.'),
    tools=[send_payout],
)
