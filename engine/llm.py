"""Language models: the deterministic ScriptedModel, any OpenAI-compatible chat-completions endpoint, and Anthropic's
Messages API."""

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
    """The model endpoint failed, or answered something that is not a reply (a chat completion, a message)."""


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
        return _post("chat completion", f"{self.base_url}/chat/completions", body, headers, self.timeout,
                     _chat_completion_reply)


def _chat_completion_reply(body: Any) -> ModelReply:
    message = body["choices"][0]["message"]
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
    return ModelReply(text=message.get("content"), tool_calls=calls)


ANTHROPIC_VERSION = "2023-06-01"
"""The `anthropic-version` header: the Messages API's only version."""


class AnthropicModel:
    """Claude through Anthropic's Messages API (`POST /v1/messages`), or any endpoint speaking it: the transcript's
    calls and results travel as `tool_use` / `tool_result` blocks. `max_tokens` caps each reply (the API wants a
    cap)."""

    def __init__(self, api_key: str, model: str, base_url: str = "https://api.anthropic.com", *,
                 timeout: float = 60.0, max_tokens: int = 4096) -> None:
        self.api_key = api_key
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_tokens = max_tokens

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
        system, turns = _messages_api_transcript(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens}
        if system:
            body["system"] = system
        body["messages"] = turns
        if tools:
            body["tools"] = [_messages_api_tool(spec) for spec in tools]
        headers = {"x-api-key": self.api_key, "anthropic-version": ANTHROPIC_VERSION}
        return _post("Messages API call", f"{self.base_url}/v1/messages", body, headers, self.timeout,
                     self._reply)

    def _reply(self, body: Any) -> ModelReply:
        """A Messages API message: its text blocks joined, its `tool_use` blocks as calls (other blocks, such as
        thinking, are not for the transcript)."""
        if not isinstance(body, dict) or not isinstance(body.get("content"), list):
            raise ValueError(f"the reply is not a message: {str(body)[:200]!r}")
        texts: list[str] = []
        calls: list[ToolCallRequest] = []
        for block in body["content"]:
            if block["type"] == "text":
                texts.append(block["text"])
            elif block["type"] == "tool_use":
                if not isinstance(block["input"], dict):
                    raise ValueError(f"the model's input for {block['name']} is not a JSON object: {block['input']!r}")
                calls.append(ToolCallRequest(name=block["name"], input=block["input"], id=block["id"]))
        if calls and body.get("stop_reason") == "max_tokens":  # the last call's input was cut off: never run it
            raise ValueError(f"the reply reached max_tokens ({self.max_tokens}) while calling {calls[-1].name}, "
                             "so that call is incomplete: give the model a larger max_tokens")
        return ModelReply(text="".join(texts) or None, tool_calls=calls)


def _messages_api_transcript(transcript: list[dict[str, Any]]) -> tuple[str, list[dict[str, Any]]]:
    """The OpenAI-format transcript as the Messages API takes it: the system messages as one `system` string, and
    the rest as content blocks (a tool result is a user's `tool_result`), consecutive messages of one role merged
    into one (the API wants user and assistant to alternate). A message of one text block is plain content."""
    system: list[str] = []
    merged: list[dict[str, Any]] = []
    for message in transcript:
        if message["role"] == "system":
            if message.get("content"):
                system.append(message["content"])
            continue
        blocks = _content_blocks(message)
        if not blocks:  # (an empty reply: the API refuses empty content)
            continue
        role = "user" if message["role"] == "tool" else message["role"]
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"] += blocks
        else:
            merged.append({"role": role, "content": blocks})
    for message in merged:
        if len(message["content"]) == 1 and message["content"][0]["type"] == "text":
            message["content"] = message["content"][0]["text"]
    return "\n\n".join(system), merged


def _content_blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    if message["role"] == "tool":
        result = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
        return [result | {"content": message["content"]} if message.get("content") else result]
    blocks = [{"type": "text", "text": message["content"]}] if message.get("content") else []
    for call in message.get("tool_calls") or []:
        name = call["function"]["name"]
        blocks.append({"type": "tool_use", "id": call["id"], "name": name,
                       "input": _arguments(name, call["function"].get("arguments"))})
    return blocks


def _messages_api_tool(spec: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI function description (`{name, description, parameters}`) as a Messages API tool."""
    tool = {"name": spec["name"]}
    if spec.get("description"):
        tool["description"] = spec["description"]
    tool["input_schema"] = spec.get("parameters") or {"type": "object", "properties": {}}
    return tool


def _post(what: str, url: str, body: dict[str, Any], headers: dict[str, str], timeout: float,
          read: Callable[[Any], ModelReply]) -> ModelReply:
    """POST `body` as JSON and `read` the JSON answer. Whatever fails is a ModelError naming `what`: an HTTP error
    with the status and what the endpoint said, a network failure, or an answer `read` cannot take."""
    try:
        response = requests.post(url, json=body, headers=headers, timeout=timeout)
        response.raise_for_status()
        return read(response.json())
    except requests.HTTPError as exc:  # the endpoint's own words say why (a bad key, a limit, no such model)
        raise ModelError(f"{what} failed: {exc}: {_said(exc.response)}") from exc
    except (requests.RequestException, ValueError, KeyError, IndexError, TypeError) as exc:
        raise ModelError(f"{what} failed: {exc}") from exc


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
    """What an endpoint that refused a call said: the message of OpenAI's `{"error": {"message"}}` (of Anthropic's
    `{"type": "error", "error": {"type", "message"}}` as `type: message`), an `error` string, else the body's
    start."""
    try:
        body = response.json()
        error = body.get("error")
    except (ValueError, AttributeError):
        body, error = None, None
    if isinstance(error, dict) and error.get("message"):
        typed = body.get("type") == "error" and isinstance(error.get("type"), str)
        error = f"{error['type']}: {error['message']}" if typed else error["message"]
    said = error if isinstance(error, str) and error else response.text
    return " ".join(said.split())[:500] or "(an empty body)"
