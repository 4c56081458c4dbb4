"""The built-in demo agent: an offline billing assistant (lookup needs no approval, refund needs a person)."""

from __future__ import annotations

import json
import re
from typing import Any

from engine import Agent, ModelReply, ScriptedModel, ToolCallRequest, ToolContext, always, ask_question, tool

CHARGES: dict[str, dict[str, Any]] = {
    "ch_1001": {"customer": "Ada Lovelace", "amount": 42.00, "currency": "usd", "description": "Annual plan"},
    "ch_1002": {"customer": "Alan Turing", "amount": 19.99, "currency": "usd", "description": "Monthly plan"},
    "ch_1003": {"customer": "Grace Hopper", "amount": 120.00, "currency": "usd", "description": "Team plan"},
}

HELP = (
    "I am the demo billing assistant. Try: \"refund $20 on ch_1001\" (needs your approval), "
    "\"look up ch_1002\" (no approval needed) or \"upgrade my plan\" (I will ask you which plan). "
    "Known charges: " + ", ".join(CHARGES) + "."
)

PLANS = [
    {"label": "Basic", "description": "$9 a month, one seat"},
    {"label": "Pro", "description": "$29 a month, five seats"},
    {"label": "Enterprise", "description": "talk to sales"},
]


@tool
def lookup_charge(charge_id: str) -> dict[str, Any]:
    """Look up a charge by id."""
    charge = CHARGES.get(charge_id)
    if charge is None:
        raise LookupError(f"no charge {charge_id}")
    return {"chargeId": charge_id, **charge}


@tool(approval=always(), title="refund charge")
def refund_charge(ctx: ToolContext, charge_id: str, amount: float) -> dict[str, Any]:
    """Refund part or all of a charge. Money leaves the account, so a person approves it first."""
    charge = CHARGES.get(charge_id)
    if charge is None:
        raise LookupError(f"no charge {charge_id}")
    if amount <= 0 or amount > charge["amount"]:
        raise ValueError(f"a refund of {amount:.2f} does not fit a charge of {charge['amount']:.2f}")
    approver = ctx.approval.responder.display_name if ctx.approval else "policy"
    return {"refundId": f"re_{ctx.call_id[-8:]}", "chargeId": charge_id, "amount": amount, "approvedBy": approver}


def _last_user(messages: list[dict[str, Any]]) -> int:
    return max(i for i, m in enumerate(messages) if m["role"] == "user")


def script(messages: list[dict[str, Any]]) -> ModelReply:
    """Plays a billing assistant from the transcript alone, so every turn can be replayed."""
    start = _last_user(messages)
    text = messages[start]["content"] or ""
    results = {m["tool_call_id"]: json.loads(m["content"]) for m in messages[start:] if m["role"] == "tool"}
    calls = [c for m in messages[start:] for c in m.get("tool_calls") or []]
    charge = re.search(r"ch_\w+", text)
    if not calls and "upgrade" in text.lower():
        return ModelReply(tool_calls=[ToolCallRequest("ask_question", {"question": "Which plan?", "options": PLANS})])
    if not calls:
        if charge is None:
            return ModelReply(text=HELP)
        return ModelReply(tool_calls=[ToolCallRequest("lookup_charge", {"charge_id": charge.group(0)})])
    last = calls[-1]
    result = results[last["id"]]
    if "error" in result and result["error"]:
        return ModelReply(text=f"That did not happen: {result['error']['message']}")
    if last["function"]["name"] == "ask_question":
        if result["status"] != "answered":
            return ModelReply(text="No problem, your plan stays as it is.")
        return ModelReply(text=f"Done: you are on the {result['answer']} plan now.")
    if last["function"]["name"] == "lookup_charge":
        wants_refund = "refund" in text.lower()
        if not wants_refund:
            return ModelReply(text=f"{result['chargeId']}: {result['description']} for {result['customer']}, "
                                   f"{result['amount']:.2f} {result['currency'].upper()}.")
        amount = re.search(r"\$?(\d+(?:\.\d{1,2})?)\b(?!\w)", text.replace(result["chargeId"], ""))
        value = float(amount.group(1)) if amount else result["amount"]
        return ModelReply(
            text=f"I will refund {value:.2f} on {result['chargeId']} once you approve.",
            tool_calls=[ToolCallRequest("refund_charge", {"charge_id": result["chargeId"], "amount": value})],
        )
    return ModelReply(text=f"Refunded {result['amount']:.2f} on {result['chargeId']} "
                           f"(approved by {result['approvedBy']}, refund {result['refundId']}).")


agent = Agent(
    name="billing-demo",
    instructions="You are a careful billing assistant. Refunds need a person's approval.",
    model=ScriptedModel(script),
    tools=[lookup_charge, refund_charge, ask_question()],
)
