"""Language models: the deterministic ScriptedModel and any OpenAI-compatible chat-completions endpoint."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import requests


@dataclass(frozen=True)
class ToolCallRequest:
    """One call the model asks for. `id` is the model's own call id when it gives one."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str | None = None


@dataclass(frozen=True)
class ModelReply:
    text: str | None = None
    tool_calls: list[ToolCallRequest] = field(default_factory=list)


class ChatModel(Protocol):
    """What the runner needs from a model: the transcript in OpenAI chat format in, one reply out."""

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply: ...


class ScriptedModel:
    """A model whose replies come from a function of the transcript: the deterministic model for tests and demos."""

    def __init__(self, fn: Callable[[list[dict[str, Any]]], ModelReply]) -> None:
        self.fn = fn

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        return self.fn(messages)


class ModelError(Exception):
    """The model endpoint failed or answered something that is not a chat completion."""


class OpenAIChatModel:
    """Any OpenAI-compatible `/chat/completions` endpoint (OpenAI, Azure-style proxies, vLLM, Ollama...)."""

    def __init__(self, base_url: str, api_key: str | None, model: str, *, timeout: float = 60.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = timeout

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        body: dict[str, Any] = {"model": self.model, "messages": messages}
        if tools:
            body["tools"] = [{"type": "function", "function": spec} for spec in tools]
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        try:
            response = requests.post(
                f"{self.base_url}/chat/completions", json=body, headers=headers, timeout=self.timeout
            )
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            if not isinstance(message, dict):
                raise ValueError(f"the reply message is {message!r}, not an object")
            calls = [
                ToolCallRequest(
                    name=call["function"]["name"],
                    input=_arguments(call["function"]["name"], call["function"].get("arguments")),
                    id=call.get("id"),
                )
                for call in message.get("tool_calls") or []
            ]
        except requests.HTTPError as exc:  # the endpoint's own words say why (a bad key, a limit, no such model)
            raise ModelError(f"chat completion failed: {exc}: {_said(exc.response)}") from exc
        except (requests.RequestException, ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelError(f"chat completion failed: {exc}") from exc
        return ModelReply(text=message.get("content"), tool_calls=calls)


def _arguments(name: str, raw: str | None) -> dict[str, Any]:
    """A tool call's arguments: a JSON object encoded as a string (absent or empty means no arguments)."""
    try:
        decoded = json.loads(raw or "{}")
    except ValueError as exc:
        raise ValueError(f"the model's arguments for {name} are not a JSON object: {exc}: {str(raw)[:200]!r}") from exc
    if not isinstance(decoded, dict):
        raise ValueError(f"the model's arguments for {name} are not a JSON object: {decoded!r}")
    return decoded


def _said(response: requests.Response) -> str:
    """What an endpoint that refused a call said: OpenAI's `{"error": {"message"}}`, else the body's start."""
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    if isinstance(error, dict) and error.get("message"):
        error = error["message"]
    said = error if isinstance(error, str) and error else response.text
    return " ".join(said.split())[:500] or "(an empty body)"
