"""OpenAIChatModel against a mocked chat-completions endpoint (never the network), and ScriptedModel."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import responses
from pydantic import BaseModel

from engine import Agent, ToolContext, tool
from engine.llm import ModelError, ModelReply, OpenAIChatModel, ScriptedModel, ToolCallRequest

BASE_URL = "http://llm.test/v1"
URL = f"{BASE_URL}/chat/completions"

WEATHER_SPEC = {
    "name": "get_weather",
    "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
}
SEND_SPEC = {"name": "send_email", "parameters": {"type": "object", "properties": {}}}


def completion(message: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-test",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
    }


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        yield rsps


def sent_body(mock: responses.RequestsMock) -> dict[str, Any]:
    assert len(mock.calls) == 1
    return json.loads(mock.calls[0].request.body)


# --- the request ---------------------------------------------------------------------------------------


def test_request_body_has_model_messages_and_wrapped_tools(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "ok"}))
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "weather in Oslo?"}]

    OpenAIChatModel(BASE_URL, "sk-test", "gpt-test").complete(messages, [WEATHER_SPEC, SEND_SPEC])

    assert sent_body(mock) == {
        "model": "gpt-test",
        "messages": messages,
        "tools": [
            {"type": "function", "function": WEATHER_SPEC},
            {"type": "function", "function": SEND_SPEC},
        ],
    }


def test_no_tools_key_when_there_are_no_tools(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "ok"}))

    OpenAIChatModel(BASE_URL, "sk-test", "gpt-test").complete([{"role": "user", "content": "hi"}], [])

    body = sent_body(mock)
    assert "tools" not in body
    assert body == {"model": "gpt-test", "messages": [{"role": "user", "content": "hi"}]}


def test_authorization_header_carries_the_key(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "ok"}))

    OpenAIChatModel(BASE_URL, "sk-secret", "gpt-test").complete([{"role": "user", "content": "hi"}], [])

    assert mock.calls[0].request.headers["Authorization"] == "Bearer sk-secret"


@pytest.mark.parametrize("api_key", [None, ""])
def test_no_authorization_header_without_a_key(mock: responses.RequestsMock, api_key: str | None) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "ok"}))

    OpenAIChatModel(BASE_URL, api_key, "local-model").complete([{"role": "user", "content": "hi"}], [])

    assert "Authorization" not in mock.calls[0].request.headers


def test_trailing_slash_of_base_url_is_ignored_and_timeout_is_passed(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "ok"}))

    OpenAIChatModel(BASE_URL + "/", None, "m", timeout=7.5).complete([{"role": "user", "content": "hi"}], [])

    call = mock.calls[0]
    assert call.request.url == URL
    assert call.request.req_kwargs["timeout"] == 7.5


# --- the reply -----------------------------------------------------------------------------------------


def test_text_only_reply(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=completion({"role": "assistant", "content": "It is sunny in Oslo."}))

    model = OpenAIChatModel(BASE_URL, "k", "m")
    reply = model.complete([{"role": "user", "content": "weather?"}], [WEATHER_SPEC])

    assert reply == ModelReply(text="It is sunny in Oslo.", tool_calls=[])


def test_reply_with_tool_calls_decodes_arguments_and_keeps_ids(mock: responses.RequestsMock) -> None:
    mock.post(
        URL,
        json=completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "call_abc",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city": "Oslo", "days": 2}'},
                    },
                    {
                        "id": "call_def",
                        "type": "function",
                        "function": {"name": "send_email", "arguments": '{"to": ["a@b.c"], "urgent": true}'},
                    },
                ],
            }
        ),
    )

    reply = OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "go"}], [WEATHER_SPEC])

    assert reply.text is None
    assert reply.tool_calls == [
        ToolCallRequest(name="get_weather", input={"city": "Oslo", "days": 2}, id="call_abc"),
        ToolCallRequest(name="send_email", input={"to": ["a@b.c"], "urgent": True}, id="call_def"),
    ]


def test_tool_call_without_id_or_arguments(mock: responses.RequestsMock) -> None:
    mock.post(
        URL,
        json=completion(
            {"role": "assistant", "content": "checking", "tool_calls": [{"function": {"name": "get_time"}}]}
        ),
    )

    reply = OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "time?"}], [])

    assert reply == ModelReply(
        text="checking", tool_calls=[ToolCallRequest(name="get_time", input={}, id=None)]
    )


# --- errors --------------------------------------------------------------------------------------------


def test_http_500_raises_model_error(mock: responses.RequestsMock) -> None:
    mock.post(URL, status=500, json={"error": {"message": "overloaded"}})

    with pytest.raises(ModelError) as info:
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [])

    assert isinstance(info.value.__cause__, requests.HTTPError)


@pytest.mark.parametrize(
    ("status", "kwargs", "said"),
    [
        (401, {"json": {"error": {"message": "Incorrect API key provided: sk-...st", "type": "invalid_request_error"}}},
         "Incorrect API key provided: sk-...st"),
        (429, {"json": {"error": {"message": "Rate limit reached for gpt-test"}}}, "Rate limit reached for gpt-test"),
        (400, {"json": {"error": "model 'llama9' not found"}}, "model 'llama9' not found"),
        (502, {"body": "upstream unavailable", "content_type": "text/plain"}, "upstream unavailable"),
    ],
    ids=["openai-error-object", "rate-limit", "error-string", "plain-text"],
)
def test_an_http_error_names_the_status_and_what_the_endpoint_said(
    mock: responses.RequestsMock, status: int, kwargs: dict[str, Any], said: str
) -> None:
    mock.post(URL, status=status, **kwargs)

    with pytest.raises(ModelError) as info:
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [])

    assert str(info.value).startswith(f"chat completion failed: {status} ")
    assert str(info.value).endswith(f": {said}")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"body": "<html>Bad gateway</html>", "content_type": "text/html"},
        {"json": {"error": {"message": "no such model"}}},
        {"json": {"choices": []}},
        {"json": {"choices": [{"index": 0}]}},
        {"json": {"choices": [{"message": None}]}},
        {"json": {"choices": [{"message": "hello"}]}},
        {"json": ["not", "an", "object"]},
        {"json": completion({"role": "assistant", "tool_calls": [{"id": "c1", "function": {}}]})},
        {"json": completion({"role": "assistant", "tool_calls": ["get_weather"]})},
    ],
    ids=[
        "html",
        "error-object",
        "no-choices",
        "no-message",
        "null-message",
        "string-message",
        "json-array",
        "tool-call-without-name",
        "tool-call-not-object",
    ],
)
def test_body_that_is_not_a_chat_completion_raises_model_error(
    mock: responses.RequestsMock, kwargs: dict[str, Any]
) -> None:
    mock.post(URL, status=200, **kwargs)

    with pytest.raises(ModelError):
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [])


def test_connection_error_raises_model_error(mock: responses.RequestsMock) -> None:
    mock.post(URL, body=requests.ConnectionError("connection refused"))

    with pytest.raises(ModelError) as info:
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [])

    assert isinstance(info.value.__cause__, requests.ConnectionError)


def test_timeout_raises_model_error(mock: responses.RequestsMock) -> None:
    mock.post(URL, body=requests.Timeout("read timed out"))

    with pytest.raises(ModelError):
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [])


@pytest.mark.parametrize("arguments", ['{"city": "Oslo"', "city=Oslo", "[1, 2]", '"Oslo"', "null"])
def test_malformed_tool_call_arguments_raise_model_error(
    mock: responses.RequestsMock, arguments: str
) -> None:
    mock.post(
        URL,
        json=completion(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [{"id": "c1", "function": {"name": "get_weather", "arguments": arguments}}],
            }
        ),
    )

    with pytest.raises(ModelError) as info:
        OpenAIChatModel(BASE_URL, "k", "m").complete([{"role": "user", "content": "hi"}], [WEATHER_SPEC])

    assert str(info.value).startswith("chat completion failed: the model's arguments for get_weather are not a "
                                      "JSON object: ")


# --- ScriptedModel -------------------------------------------------------------------------------------


def test_scripted_model_passes_the_messages_to_its_function() -> None:
    seen: list[list[dict[str, Any]]] = []
    expected = ModelReply(text="scripted", tool_calls=[ToolCallRequest(name="t", input={"a": 1}, id="x")])

    def script(messages: list[dict[str, Any]]) -> ModelReply:
        seen.append(messages)
        return expected

    messages = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": "hi"}]
    reply = ScriptedModel(script).complete(messages, [WEATHER_SPEC])

    assert reply is expected
    assert seen == [messages]


def test_scripted_model_reply_can_depend_on_the_transcript() -> None:
    model = ScriptedModel(lambda messages: ModelReply(text=f"{len(messages)}:{messages[-1]['content']}"))

    assert model.complete([{"role": "user", "content": "one"}], []).text == "1:one"
    two = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert model.complete(two, []).text == "2:b"


def test_a_tools_spec_is_its_name_docstring_and_input_schema_at_every_step() -> None:
    @tool
    def get_weather(city: str, days: int = 1) -> dict[str, Any]:
        """Weather for a city"""
        return {"city": city, "days": days}

    agent = Agent(name="weather", instructions="", model=ScriptedModel(lambda _: ModelReply(text="ok")),
                  tools=[get_weather])

    first, second = agent.tool_specs(), agent.tool_specs()

    assert first == second == [{
        "name": "get_weather",
        "description": "Weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"title": "City", "type": "string"},
                           "days": {"default": 1, "title": "Days", "type": "integer"}},
            "required": ["city"],
            "additionalProperties": False,  # the model is told what validation enforces
        },
    }]


class Line(BaseModel):
    sku: str
    qty: int = 1


def test_a_tool_taking_pydantic_models_gets_them_as_models_and_its_schema_describes_them() -> None:
    seen: list[Any] = []

    @tool
    def order(lines: list[Line], rush: Line | None = None) -> dict[str, Any]:
        """Place an order."""
        seen.append((lines, rush))
        return {"skus": [line.sku for line in lines], "rush": rush.sku if rush else None}

    assert order.parameters["properties"]["lines"] == {
        "items": {"$ref": "#/$defs/Line"}, "title": "Lines", "type": "array"}
    assert order.parameters["$defs"]["Line"]["required"] == ["sku"]

    context = ToolContext(session_id="s", turn_id="t", call_id="c", requester=None, approval=None,
                          idempotency_key="k")
    output = order.invoke(context, {"lines": [{"sku": "a", "qty": 2}, {"sku": "b"}], "rush": {"sku": "c"}})

    assert output == {"skus": ["a", "b"], "rush": "c"}
    assert seen == [([Line(sku="a", qty=2), Line(sku="b")], Line(sku="c"))]
