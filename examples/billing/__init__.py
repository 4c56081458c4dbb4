"""The billing demo, `hitl serve`'s default agent: its code lives in gateway/demo.py, which the gateway ships.
`on_model` puts the same tools on a real model (examples/openai_compatible, examples/anthropic_model)."""

from __future__ import annotations

from engine import Agent, ask_question
from engine.llm import ChatModel
from gateway.demo import agent, lookup_charge, refund_charge

__all__ = ["agent", "on_model"]


def on_model(name: str, model: ChatModel) -> Agent:
    """The demo's tools and the built-in `ask_question` on `model`, told to be careful, stopping to ask whether to go
    on after 10 model calls."""
    return Agent(
        name=name,
        instructions=(
            "You are a careful billing assistant. Look a charge up before you refund it, refund no more than was "
            "charged, and ask the user (ask_question) when their request is ambiguous. A person approves every "
            "refund; if they deny it, say so and do not try again."
        ),
        model=model,
        tools=[lookup_charge, refund_charge, ask_question(expires_in=3600)],
        max_steps=10,
    )
