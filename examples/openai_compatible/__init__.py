"""The billing demo's tools on a real model, behind any OpenAI-compatible `/chat/completions` endpoint.

OPENAI_BASE_URL (default https://api.openai.com/v1), OPENAI_API_KEY (unset: no Authorization header, as a local
server such as Ollama or vLLM wants) and OPENAI_MODEL (default gpt-4o-mini) say which.
"""

from __future__ import annotations

import os

from engine import OpenAIChatModel
from examples.billing import on_model

agent = on_model("billing-openai", OpenAIChatModel(
    base_url=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"),
    api_key=os.environ.get("OPENAI_API_KEY") or None,
    model=os.environ.get("OPENAI_MODEL", "gpt-4o-mini"),
))
