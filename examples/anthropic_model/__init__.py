"""The billing demo's tools on Claude, through Anthropic's Messages API (or an endpoint that speaks it).

ANTHROPIC_API_KEY (sent as `x-api-key`), ANTHROPIC_MODEL (default claude-haiku-4-5) and ANTHROPIC_BASE_URL
(default https://api.anthropic.com) say which.
"""

from __future__ import annotations

import os

from engine import AnthropicModel
from examples.billing import on_model

agent = on_model("billing-claude", AnthropicModel(
    api_key=os.environ.get("ANTHROPIC_API_KEY", ""),
    model=os.environ.get("ANTHROPIC_MODEL", "claude-haiku-4-5"),
    base_url=os.environ.get("ANTHROPIC_BASE_URL", "https://api.anthropic.com"),
))
