"""The agent every engine, API and end-to-end test drives, in-process and on RQ workers alike.

Its model reads the turn's latest user message as a script: `{"steps": [[{"name": ..., "input": ...}], ...],
"final": "..."}`; each model call plays the next step, then it answers `final` followed by every tool
result of the turn, so a test can read what the model saw. A message that is not a script gets
"noted: <message>". Tools append what they did to the tool ledger (tests/support/ledger.py), which the test
process and worker processes share. In a worker of the reliability suite, a tool can be where the worker stops
to be killed (tests/support/faults.py).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal

from engine import (
    Agent,
    ApprovalContext,
    ApprovalPolicy,
    ModelReply,
    ResponseContext,
    ScriptedModel,
    ToolCallRequest,
    ToolContext,
    always,
    approvers,
    ask_question,
    auto,
    once,
    tool,
)
from tests.support import faults
from tests.support.ledger import append, read_ledger

MAX_STEPS = 12
"""Model calls per turn before the agent asks whether to continue."""


def record(tool_name: str, ctx: ToolContext | None, **data: Any) -> None:
    entry = {"tool": tool_name, **data}
    if ctx is not None:
        entry |= {
            "callId": ctx.call_id,
            "idempotencyKey": ctx.idempotency_key,
            "requester": ctx.requester.principal_id if ctx.requester else None,
            "responder": ctx.approval.responder.principal_id if ctx.approval else None,
            "note": ctx.approval.note if ctx.approval else None,
        }
    append(entry)
    faults.reach(f"tool:{tool_name}")


def script(*steps: list[tuple[str, dict[str, Any]]], final: str = "done", think: bool = False) -> str:
    """The user message that makes the test model play `steps`, then answer `final`; with `think`, the model
    takes until the test says it steered (`thinking`, `steered`) to answer it."""
    return json.dumps({
        "steps": [[{"name": name, "input": data} for name, data in step] for step in steps],
        "final": final, "think": think,
    })


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def logged(tool: str, phase: str) -> Callable[[], bool]:
    """Whether the ledger holds `phase` of `tool` yet."""
    return lambda: any(e["tool"] == tool and e.get("phase") == phase for e in read_ledger())


def started(tool: str) -> Callable[[], bool]:
    return logged(tool, "start")


thinking = logged("model", "thinking")
"""Whether the model of a `think` script is working on its final answer."""


def steered() -> None:
    """Let the model of a `think` script answer: the test has sent its steer."""
    record("model", None, phase="steered")


judging = logged("policy", "judging")
"""Whether a `held-` request policy (or reviewer) is working on its verdict."""


def release() -> None:
    """Let a `held-` request policy answer: the test has done what it does meanwhile."""
    record("policy", None, phase="released")


def held(verdict: str) -> str:
    """A request policy or reviewer given `held-<verdict>` says it is judging, then takes until the test
    releases it (`judging`, `release`) to answer `<verdict>`; any other verdict is answered at once."""
    if not verdict.startswith("held-"):
        return verdict
    record("policy", None, phase="judging")
    wait_for(logged("policy", "released"), 10.0, "the test to release the policy")
    return verdict.removeprefix("held-")


def play(messages: list[dict[str, Any]]) -> ModelReply:
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    try:
        plan = json.loads(messages[start]["content"])
        plan["steps"]
    except (ValueError, TypeError, KeyError):  # a plain message (a steer, a late answer): acknowledge, end
        return ModelReply(text=f"noted: {messages[start]['content']}")
    done = sum(1 for m in messages[start:] if m["role"] == "assistant" and m.get("tool_calls"))
    if done < len(plan["steps"]):
        return ModelReply(
            text=f"step {done + 1}",
            tool_calls=[ToolCallRequest(c["name"], c["input"]) for c in plan["steps"][done]],
        )
    if plan.get("think"):
        record("model", None, phase="thinking")
        wait_for(logged("model", "steered"), 30.0, "the test to steer")
    results = [m["content"] for m in messages[start:] if m["role"] == "tool"]
    return ModelReply(text=" | ".join([plan["final"], *results]))


@tool
def lookup(order_id: str) -> dict[str, Any]:
    """Look up an order (no approval)."""
    record("lookup", None, order_id=order_id)
    return {"order": order_id, "status": "shipped"}


@tool(approval=always(expires_in=600))
def refund(ctx: ToolContext, charge_id: str, amount: float) -> dict[str, Any]:
    """Refund a charge (always asks)."""
    record("refund", ctx, charge_id=charge_id, amount=amount)
    return {"refunded": amount, "charge": charge_id}


@tool(approval=once())
def deploy(ctx: ToolContext, env: str) -> dict[str, Any]:
    """Deploy (asks once per session)."""
    record("deploy", ctx, env=env)
    return {"deployed": env}


@tool(approval=ApprovalPolicy(request=always(), editable=True))
def adjustable_refund(ctx: ToolContext, charge_id: str, amount: float, currency: Literal["usd", "eur"] = "usd",
                      notify: bool = False, tags: list[str] | None = None) -> dict[str, Any]:
    """A refund the approver may edit before approving (always asks)."""
    record("adjustable_refund", ctx, charge_id=charge_id, amount=amount, currency=currency, notify=notify, tags=tags)
    return {"refunded": amount, "currency": currency}


@tool(approval=once(), editable=True)
def set_limit(ctx: ToolContext, account: str, limit: int) -> dict[str, Any]:
    """A limit change asked once per session, editable."""
    record("set_limit", ctx, account=account, limit=limit)
    return {"limit": limit}


def review(messages: list[dict[str, Any]]) -> ModelReply:
    verdict = held(json.loads(messages[-1]["content"])["input"]["verdict"])
    if verdict == "error":
        raise RuntimeError("reviewer down")
    if verdict == "garbage":
        return ModelReply(text="I think it is fine?")
    return ModelReply(text=json.dumps({"verdict": verdict, "reason": f"reviewer says {verdict}"}))


@tool(approval=auto(model=ScriptedModel(review), instructions="Be strict.", criteria=["no prod"]))
def reviewed(ctx: ToolContext, verdict: str) -> dict[str, Any]:
    """A call judged by the auto() reviewer."""
    record("reviewed", ctx, verdict=verdict)
    return {"ran": verdict}


FORMS: dict[str, Any] = {
    "true": True,
    "false": False,
    "none": None,
    "not-applicable": "not-applicable",
    "user-approval": "user-approval",
    "approved": "approved",
    "denied": "denied",
    "approved-dict": {"type": "approved", "reason": "low amount"},
    "denied-dict": {"type": "denied", "reason": "over the limit"},
}


def form_policy(ctx: ApprovalContext) -> Any:
    return FORMS[held(ctx.tool_input["form"])]


async def async_form_policy(ctx: ApprovalContext) -> Any:
    await asyncio.sleep(3600 if ctx.tool_input["form"] == "hang" else 0)  # "hang": a policy that never answers
    return FORMS[ctx.tool_input["form"]]


@tool(approval=form_policy)
def custom(ctx: ToolContext, form: str) -> dict[str, Any]:
    """Gated by a sync policy returning the status form named by `form`."""
    record("custom", ctx, form=form)
    return {"form": form}


@tool(approval=async_form_policy)
def custom_async(ctx: ToolContext, form: str) -> dict[str, Any]:
    """Gated by an async policy returning the status form named by `form`."""
    record("custom_async", ctx, form=form)
    return {"form": form}


def only_bob(ctx: ResponseContext) -> dict[str, str]:
    if ctx.response.responder.principal_id == "bob":
        return {"status": "allowed"}
    return {"status": "rejected", "reason": "only bob may approve payouts"}


@tool(approval=ApprovalPolicy(request=always(), response=only_bob))
def payout(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A payout only bob may approve."""
    record("payout", ctx, amount=amount)
    return {"paid": amount}


def audit_down(ctx: ResponseContext) -> dict[str, str]:
    raise ConnectionError("the audit service is down")


@tool(approval=ApprovalPolicy(request=always(), response=audit_down))
def audited_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund whose response policy cannot judge anyone (its audit service is down)."""
    record("audited_refund", ctx, amount=amount)
    return {"refunded": amount}


def two_people(ctx: ResponseContext) -> dict[str, str]:
    """Approve needs two different people; the first one's response waits."""
    if ctx.response.decision != "approve":
        return {"status": "allowed"}
    others = {c.responder.principal_id for c in ctx.candidates if c.decision == "approve"}
    others.discard(ctx.response.responder.principal_id)
    return {"status": "allowed"} if others else {"status": "pending"}


@tool(approval=ApprovalPolicy(request=always(), response=two_people))
def wire_transfer(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A transfer two people approve."""
    record("wire_transfer", ctx, amount=amount)
    return {"sent": amount}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("group:release", quorum=2), editable=True))
def group_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release two people of the `release` group approve (a person's principals count once); editable, which a
    quorum does not allow."""
    record("group_release", ctx, version=version)
    return {"released": version}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("alice", "bob", "carol", quorum=2)))
def pair_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release two of alice, bob and carol approve."""
    record("pair_release", ctx, version=version)
    return {"released": version}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("slack-usergroup:S0RELEASE", quorum=2)))
def slack_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release two people of a Slack user group approve."""
    record("slack_release", ctx, version=version)
    return {"released": version}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("github-team:acme/release", quorum=2)))
def github_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release two people of a GitHub team approve."""
    record("github_release", ctx, version=version)
    return {"released": version}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("slack-usergroup:S0GONE")))
def unknown_group_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release only a Slack user group Slack does not know may approve: nobody can."""
    record("unknown_group_release", ctx, version=version)
    return {"released": version}


@tool(approval=ApprovalPolicy(request=always(), response=approvers("group:crowd", quorum=3)))
def crowd_release(ctx: ToolContext, version: str) -> dict[str, Any]:
    """A release three of the `crowd` group (twenty people) approve."""
    record("crowd_release", ctx, version=version)
    return {"released": version}


@tool(approval=always())
def slow_refund(ctx: ToolContext, seconds: float) -> dict[str, Any]:
    """An approval-gated tool that takes a while on its first attempt (a worker may die while it runs)."""
    record("slow_refund", ctx, phase="start", again=ctx.previous_attempt_may_have_run)
    if not ctx.previous_attempt_may_have_run:
        time.sleep(seconds)
    record("slow_refund", ctx, phase="end")
    return {"slept": seconds}


@tool(idempotent=True)
def slow_sync(ctx: ToolContext, seconds: float) -> dict[str, Any]:
    """An idempotent tool, slow on its first attempt: safe to run again after a crash."""
    record("slow_sync", ctx, phase="start")
    if not ctx.previous_attempt_may_have_run:
        time.sleep(seconds)
    record("slow_sync", ctx, phase="end")
    return {"slept": seconds}


@tool
def fragile(ctx: ToolContext, seconds: float) -> dict[str, Any]:
    """Neither idempotent nor gated: after a crash it is not run again."""
    record("fragile", ctx, phase="start")
    time.sleep(seconds)
    return {"slept": seconds}


@tool
def survey(ctx: ToolContext, topic: str) -> dict[str, Any]:
    """A workflow tool: a side effect in a step, then three questions, then a result."""
    ticket = ctx.step("open-ticket", lambda: record("survey", ctx, phase="ticket", topic=topic) or f"T-{topic}")
    color = ctx.ask("Which color?", options=["Red", "Blue"])
    size = ctx.ask("Which size?", options=[{"label": "S", "description": "small"}, {"label": "L"}],
                   expires_in=3600)
    comment = ctx.ask("Any comment?")
    record("survey", ctx, phase="done", color=color.value, size=size.value, comment=comment.value)
    return {"ticket": ticket, "color": color.value, "size": size.value, "comment": comment.value,
            "dismissed": [a.outcome for a in (color, size, comment) if a.dismissed]}


@tool
def ask_then_fail(ctx: ToolContext) -> dict[str, Any]:
    """Asks, then raises: the failure reaches the model as a tool error."""
    answer = ctx.ask("Proceed?", options=["Yes please", "No thanks"])
    raise RuntimeError(f"failed after {answer.value}")


@tool
def pick(ctx: ToolContext, options: list[str]) -> dict[str, Any]:
    """Asks which of `options`, taking no other answer."""
    return {"picked": ctx.ask("Which one?", options=options, allow_freeform=False).value}


@tool
def broken(reason: str) -> dict[str, Any]:
    """Always raises."""
    raise RuntimeError(reason)


@tool
def average(values: list[float]) -> dict[str, Any]:
    """The mean of some numbers: NaN for none, a float JSON has no word for."""
    record("average", None, values=values)
    return {"mean": sum(values) / len(values) if values else float("nan")}


SECOND_PHONE = "+15550002222"
"""bob's phone (tests/twilio/support.py): where `escalated_refund` escalates, and who may then approve it."""


@tool(approval=ApprovalPolicy(request=always(), remind_every=1, remind_max=2))
def nudged_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund whose approval reminds every second, twice at most."""
    record("nudged_refund", ctx, amount=amount)
    return {"refunded": amount}


@tool(approval=ApprovalPolicy(request=always(), escalate_after=1,
                              escalate_to={"channel": "twilio", "address": {"to": SECOND_PHONE}},
                              escalate_approvers=[f"twilio:{SECOND_PHONE}", "bob"]))
def escalated_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund whose approval, after a second, is also texted to bob, who may then approve it too (by SMS, or
    with his API key)."""
    record("escalated_refund", ctx, amount=amount)
    return {"refunded": amount}


@tool(approval=ApprovalPolicy(request=always(expires_in=2), on_timeout="approve"))
def lenient_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund approved by the app when nobody answers within two seconds."""
    record("lenient_refund", ctx, amount=amount)
    return {"refunded": amount}


SUPPORT_CHANNEL = "C0SUPPORT"
"""A Slack channel where the support team watches every managed refund (tests/gateway/test_places.py)."""


@tool(approval=ApprovalPolicy(request=always(), response=approvers([f"twilio:{SECOND_PHONE}"]), show_to=[
    {"person": "manager"}, {"channel": "slack", "address": {"channel": SUPPORT_CHANNEL}}]))
def managed_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund a support rep proposes and the manager approves: also shown to the person `manager` (on their first
    channel that can reach them: bob's phone) and in the support channel, and only bob's phone may approve it."""
    record("managed_refund", ctx, amount=amount)
    return {"refunded": amount}


@tool(approval=ApprovalPolicy(request=always(), response=approvers([f"twilio:{SECOND_PHONE}"]),
                              show_to={"group": "finance"}, show_in_session=False))
def finance_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund shown to each member of the group `finance` and not where it was asked; bob's phone approves it."""
    record("finance_refund", ctx, amount=amount)
    return {"refunded": amount}


@tool(response=approvers([f"twilio:{SECOND_PHONE}"]))
def account_question(ctx: ToolContext) -> dict[str, Any]:
    """A workflow tool whose question is shown to the person `bob` (on their first channel that can reach them) and
    not where it was asked; bob's phone answers it."""
    account = ctx.ask("Which account?", options=["Checking", "Savings"], show_to={"person": "bob"},
                      show_in_session=False)
    return {"account": account.value}


FIRST_PHONE = "+15550001111"
"""alice's phone (tests/twilio/support.py): where `texted_refund` escalates."""


@tool(approval=ApprovalPolicy(request=always(), escalate_after=1,
                              escalate_to={"channel": "twilio", "address": {"to": FIRST_PHONE}}))
def texted_refund(ctx: ToolContext, amount: float) -> dict[str, Any]:
    """A refund whose approval, after a second, is also texted to alice's phone; the default response policy
    still decides who may approve it (its requester: from that phone, only if it is linked to the same person)."""
    record("texted_refund", ctx, amount=amount)
    return {"refunded": amount}


@tool
def nudged_survey(ctx: ToolContext) -> dict[str, Any]:
    """A workflow tool whose question reminds every second, twice at most."""
    color = ctx.ask("Which color?", options=["Red", "Blue"], remind_every=1, remind_max=2)
    return {"color": color.value, "outcome": color.outcome}


agent = Agent(
    name="test-agent",
    instructions="You are the test agent.",
    model=ScriptedModel(play),
    tools=[lookup, refund, adjustable_refund, set_limit, deploy, reviewed, custom, custom_async, payout, audited_refund,
           wire_transfer, slow_refund, slow_sync, fragile, broken, average, survey, ask_then_fail, pick, nudged_refund,
           escalated_refund, texted_refund, lenient_refund, nudged_survey, managed_refund, finance_refund,
           account_question, group_release, slack_release, unknown_group_release, crowd_release, github_release,
           pair_release,
           ask_question(expires_in=timedelta(minutes=30))],
    max_steps=MAX_STEPS,
)

faults.install()
