"""The billing demo's tools on a real model, behind any OpenAI-compatible `/chat/completions` endpoint.

OPENAI_BASE_URL (default https://api.openai.com/v1), OPENAI_API_KEY (unset: no Authorization header, as a local
server such as Ollama or vLLM wants) and OPENAI_MODEL (default gpt-4o-mini) say which.
"""

from __future__ import annotations

import os

from engine import Agent, OpenAIChatModel, ask_question
from gateway.demo import lookup_charge, refund_charge

agent = Agent(
    name="billing-openai",
    instructions=(
        "You are a careful billing assistant. Look a charge up before you refund it, refund no more than was "
        "charged, and ask the user (ask_question) when their request is ambiguous. A person approves every refund; "
        "if they deny it, say so and do not try again."
    ),
    model=OpenAIChatModel(
        base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
        api_key=os.environ.get("OPENAI_API_KEY") or None,
        model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
    ),
    tools=[lookup_charge, refund_charge, ask_question(expires_in=3600)],
    max_steps=10,
)
