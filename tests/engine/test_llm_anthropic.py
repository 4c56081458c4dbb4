"""AnthropicModel against recorded Messages API answers served by `responses` (never the network): the request it
sends for a transcript, the replies it reads, the errors it names, an agent turn through the engine, and auto()."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import responses

from engine import Agent, AnthropicModel, auto
from engine.llm import ModelError, ModelReply, ToolCallRequest
from engine.policies import REVIEW_INSTRUCTIONS
from gateway.settings import Settings
from tests.conftest import API_KEYS, Stack
from tests.engine.test_policies import make_ctx
from tests.support.agent import lookup, read_ledger, refund

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "anthropic"
BASE_URL = "http://anthropic.test"
URL = f"{BASE_URL}/v1/messages"

LOOKUP_SPEC = {
    "name": "lookup",
    "description": "Look up an order (no approval).",
    "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
}
REFUND_SPEC = {
    "name": "refund",
    "parameters": {"type": "object", "properties": {"charge_id": {"type": "string"}, "amount": {"type": "number"}}},
}


def recorded_reply(name: str) -> dict[str, Any]:
    return json.loads((FIXTURES / name).read_text())


def call(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant's tool call as the runner keeps it (OpenAI's wire form, arguments as a JSON string)."""
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


@pytest.fixture
def mock() -> Iterator[responses.RequestsMock]:
    with responses.RequestsMock(assert_all_requests_are_fired=True) as rsps:
        yield rsps


def sent(mock: responses.RequestsMock, index: int = 0) -> dict[str, Any]:
    return json.loads(mock.calls[index].request.body)


def model(**kwargs: Any) -> AnthropicModel:
    return AnthropicModel("sk-ant-test", "claude-haiku-4-5", BASE_URL, **kwargs)


# --- the request ---------------------------------------------------------------------------------------


def test_a_transcript_with_tool_round_trips_is_sent_as_alternating_messages_with_tool_blocks(
        mock: responses.RequestsMock) -> None:
    mock.post(URL, json=recorded_reply("refund_done.json"))
    transcript = [
        {"role": "system", "content": "You are a careful billing assistant."},
        {"role": "user", "content": "Order o-1 and o-2 arrived broken: refund ch_1."},
        {"role": "assistant", "content": None,
         "tool_calls": [call("call_a", "lookup", {"order_id": "o-1"}), call("call_b", "lookup", {"order_id": "o-2"})]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"order": "o-1", "status": "shipped"}'},
        {"role": "tool", "tool_call_id": "call_b", "content": '{"order": "o-2", "status": "shipped"}'},
        {"role": "assistant", "content": "Both shipped. Refunding once approved.",
         "tool_calls": [call("call_c", "refund", {"charge_id": "ch_1", "amount": 20.0})]},
        {"role": "tool", "tool_call_id": "call_c",
         "content": '{"error": {"code": "TOOL_EXECUTION_DENIED", "message": "Cancelled by alice: too much"}}'},
        {"role": "user", "content": "Refund 10 instead."},  # a steer right after the results: the same user turn
        {"role": "user", "content": "Please."},
    ]

    model().complete(transcript, [LOOKUP_SPEC, REFUND_SPEC])

    assert sent(mock) == {
        "model": "claude-haiku-4-5",
        "max_tokens": 4096,
        "system": "You are a careful billing assistant.",
        "messages": [
            {"role": "user", "content": "Order o-1 and o-2 arrived broken: refund ch_1."},
            {"role": "assistant", "content": [
                {"type": "tool_use", "id": "call_a", "name": "lookup", "input": {"order_id": "o-1"}},
                {"type": "tool_use", "id": "call_b", "name": "lookup", "input": {"order_id": "o-2"}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_a", "content": '{"order": "o-1", "status": "shipped"}'},
                {"type": "tool_result", "tool_use_id": "call_b", "content": '{"order": "o-2", "status": "shipped"}'},
            ]},
            {"role": "assistant", "content": [
                {"type": "text", "text": "Both shipped. Refunding once approved."},
                {"type": "tool_use", "id": "call_c", "name": "refund", "input": {"charge_id": "ch_1", "amount": 20.0}},
            ]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "call_c",
                 "content": '{"error": {"code": "TOOL_EXECUTION_DENIED", "message": "Cancelled by alice: too much"}}'},
                {"type": "text", "text": "Refund 10 instead."},
                {"type": "text", "text": "Please."},
            ]},
        ],
        "tools": [
            {"name": "lookup", "description": "Look up an order (no approval).",
             "input_schema": LOOKUP_SPEC["parameters"]},
            {"name": "refund", "input_schema": REFUND_SPEC["parameters"]},
        ],
    }


def test_an_empty_reply_in_the_transcript_is_left_out_and_its_neighbours_merge(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=recorded_reply("refund_done.json"))
    transcript = [{"role": "user", "content": "hello"}, {"role": "assistant", "content": ""},
                  {"role": "user", "content": "anyone there?"}]

    model().complete(transcript, [])

    body = sent(mock)
    assert "system" not in body and "tools" not in body  # none given
    assert body["messages"] == [{"role": "user", "content": [{"type": "text", "text": "hello"},
                                                             {"type": "text", "text": "anyone there?"}]}]


def test_headers_url_timeout_and_max_tokens(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=recorded_reply("refund_done.json"))

    model(timeout=7.5, max_tokens=512).complete([{"role": "user", "content": "hi"}], [])

    request = mock.calls[0].request
    assert request.url == URL
    assert request.headers["x-api-key"] == "sk-ant-test"
    assert request.headers["anthropic-version"] == "2023-06-01"
    assert request.headers["Content-Type"] == "application/json"
    assert "Authorization" not in request.headers
    assert request.req_kwargs["timeout"] == 7.5
    assert sent(mock)["max_tokens"] == 512


def test_the_default_endpoint_is_anthropics(mock: responses.RequestsMock) -> None:
    mock.post("https://api.anthropic.com/v1/messages", json=recorded_reply("refund_done.json"))

    AnthropicModel("sk-ant-test", "claude-haiku-4-5", "https://api.anthropic.com/").complete(
        [{"role": "user", "content": "hi"}], [])
    AnthropicModel("sk-ant-test", "claude-haiku-4-5").complete([{"role": "user", "content": "hi"}], [])

    assert [c.request.url for c in mock.calls] == ["https://api.anthropic.com/v1/messages"] * 2


# --- the reply -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "expected"),
    [
        ("refund_done.json",
         ModelReply(text="Refunded 20.00 on ch_1. The customer will see it in 5-10 business days.")),
        ("lookup_tool_use.json",
         ModelReply(tool_calls=[ToolCallRequest("lookup", {"order_id": "o-1"}, "toolu_01PESr9smeeq0Ivqx10zlp6p")])),
        ("refund_text_and_tool_use.json",
         ModelReply(text="Order o-1 has shipped. I will refund 20.00 on ch_1 once a person approves it.",
                    tool_calls=[ToolCallRequest("refund", {"charge_id": "ch_1", "amount": 20},
                                                "toolu_01PEqiN8vNPoT0HjgzWt6VY7")])),
        ("parallel_tool_use.json",
         ModelReply(text="I'll look up both orders.",
                    tool_calls=[ToolCallRequest("lookup", {"order_id": "o-1"}, "toolu_01knWVFJfvvWdzvOhtqYJSSf"),
                                ToolCallRequest("lookup", {"order_id": "o-2"}, "toolu_01tDDsGhLb6sn4XEJI59RhaL")])),
    ],
    ids=["text", "tool-use", "text-and-tool-use", "two-tool-uses"],
)
def test_a_reply_is_its_text_and_its_tool_uses(
        mock: responses.RequestsMock, fixture: str, expected: ModelReply) -> None:
    mock.post(URL, json=recorded_reply(fixture))

    assert model().complete([{"role": "user", "content": "go"}], [LOOKUP_SPEC, REFUND_SPEC]) == expected


def test_text_blocks_are_joined_and_other_blocks_ignored(mock: responses.RequestsMock) -> None:
    reply = recorded_reply("refund_done.json")
    reply["content"] = [{"type": "thinking", "thinking": "hm", "signature": "sig"},
                        {"type": "text", "text": "Refunded "}, {"type": "text", "text": "20.00."}]
    mock.post(URL, json=reply)

    assert model().complete([{"role": "user", "content": "go"}], []) == ModelReply(text="Refunded 20.00.")


def test_a_tool_use_cut_off_by_max_tokens_is_an_error_naming_it(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=recorded_reply("max_tokens_in_tool_use.json"))

    with pytest.raises(ModelError) as info:
        model(max_tokens=64).complete([{"role": "user", "content": "refund ch_1"}], [REFUND_SPEC])

    assert str(info.value) == ("Messages API call failed: the reply reached max_tokens (64) while calling refund, so "
                               "that call is incomplete: give the model a larger max_tokens")


def test_text_cut_off_by_max_tokens_is_kept(mock: responses.RequestsMock) -> None:
    reply = recorded_reply("max_tokens_in_tool_use.json")
    reply["content"] = reply["content"][:1]
    mock.post(URL, json=reply)

    assert model(max_tokens=64).complete([{"role": "user", "content": "hi"}], []) == ModelReply(
        text="I will refund the charge once it is approved.")


# --- errors --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "fixture", "start", "said"),
    [
        (401, "error_authentication.json", "401 Client Error: Unauthorized", "authentication_error: invalid x-api-key"),
        (529, "error_overloaded.json", "529 Server Error", "overloaded_error: Overloaded"),
    ],
    ids=["bad-key", "overloaded"],
)
def test_an_http_error_names_the_status_and_the_apis_error(
        mock: responses.RequestsMock, status: int, fixture: str, start: str, said: str) -> None:
    mock.post(URL, status=status, json=recorded_reply(fixture))

    with pytest.raises(ModelError) as info:
        model().complete([{"role": "user", "content": "hi"}], [])

    assert str(info.value).startswith(f"Messages API call failed: {start}")
    assert str(info.value).endswith(f"for url: {URL}: {said}")
    assert isinstance(info.value.__cause__, requests.HTTPError)


def test_a_connection_error_is_a_model_error(mock: responses.RequestsMock) -> None:
    mock.post(URL, body=requests.ConnectionError("connection refused"))

    with pytest.raises(ModelError) as info:
        model().complete([{"role": "user", "content": "hi"}], [])

    assert str(info.value) == "Messages API call failed: connection refused"
    assert isinstance(info.value.__cause__, requests.ConnectionError)


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"body": "<html>Bad gateway</html>", "content_type": "text/html"}, "Expecting value"),
        ({"json": recorded_reply("error_overloaded.json")}, "the reply is not a message: "),
        ({"json": ["not", "a", "message"]}, "the reply is not a message: "),
        ({"json": {**recorded_reply("refund_done.json"), "content": "Refunded."}}, "the reply is not a message: "),
        ({"json": {**recorded_reply("refund_done.json"), "content": [{"text": "no type"}]}}, "'type'"),
        ({"json": {**recorded_reply("lookup_tool_use.json"),
                   "content": [{"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": '{"order_id": 1}'}]}},
         "the model's input for lookup is not a JSON object: "),
    ],
    ids=["html", "error-body-with-200", "json-array", "content-string", "block-without-type", "input-string"],
)
def test_a_body_that_is_not_a_message_is_a_model_error(
        mock: responses.RequestsMock, kwargs: dict[str, Any], said: str) -> None:
    mock.post(URL, status=200, **kwargs)

    with pytest.raises(ModelError) as info:
        model().complete([{"role": "user", "content": "hi"}], [])

    assert str(info.value).startswith(f"Messages API call failed: {said}")


# --- auto() with an AnthropicModel reviewer -------------------------------------------------------------


def test_auto_with_an_anthropic_reviewer_gives_its_verdict(mock: responses.RequestsMock) -> None:
    mock.post(URL, json=recorded_reply("review_verdict.json"))
    policy = auto(model(), instructions="You guard a developer laptop.",
                  criteria=["Deny anything that deletes files outside /tmp"])

    status = policy(make_ctx(tool_name="shell", tool_input={"command": "rm -rf ~"}))

    assert status == {"type": "denied", "reason": "it deletes files outside /tmp"}
    body = sent(mock)
    assert body["system"] == (f"{REVIEW_INSTRUCTIONS}\nYou guard a developer laptop.\n"
                              "- Deny anything that deletes files outside /tmp")
    assert body["messages"] == [{"role": "user", "content": '{"input": {"command": "rm -rf ~"}, "tool": "shell"}'}]
    assert "tools" not in body


def test_auto_with_an_overloaded_anthropic_reviewer_asks_a_person(mock: responses.RequestsMock) -> None:
    mock.post(URL, status=529, json=recorded_reply("error_overloaded.json"))

    assert auto(model())(make_ctx()) == "user-approval"


# --- an agent turn through the engine -------------------------------------------------------------------


claude_agent = Agent(name="claude-billing", instructions="You are a careful billing assistant.",
                     model=model(), tools=[lookup, refund])


@pytest.fixture
def claude(tmp_path: Path) -> Iterator[Stack]:
    """SQLite and in-process jobs (so `responses` answers the model calls) serving `claude_agent`."""
    stack = Stack("sqlite", Settings(database_url=f"sqlite:///{tmp_path / 'hitl.db'}",
                                     agent=f"{__name__}:claude_agent", api_keys=API_KEYS, sweep_seconds=3600))
    yield stack
    stack.close()


def test_an_agent_on_claude_parks_on_an_approval_and_resumes_to_its_answer(
        mock: responses.RequestsMock, claude: Stack) -> None:
    for reply in ("lookup_tool_use.json", "refund_text_and_tool_use.json", "refund_done.json"):
        mock.post(URL, json=recorded_reply(reply))

    sid, _ = claude.start("Order o-1 arrived broken: refund the 20.00 on ch_1.")

    [approval] = claude.pending(sid)  # lookup ran at once; the refund waits for a person
    assert (approval["action"]["toolName"], approval["action"]["input"]) == ("refund", {"charge_id": "ch_1",
                                                                                        "amount": 20})
    assert claude.turn(sid)["status"] == "waiting"
    assert len(mock.calls) == 2 and [e["tool"] for e in read_ledger()] == ["lookup"]

    claude.answer(approval["requestId"], "approve")

    turn = claude.turn(sid)
    assert turn["status"] == "completed"
    assert turn["result"] == "Refunded 20.00 on ch_1. The customer will see it in 5-10 business days."
    assert [(e["tool"], e.get("responder")) for e in read_ledger()] == [("lookup", None), ("refund", "alice")]
    looked_up, refunded = (c["callId"] for c in turn["toolCalls"])
    assert sent(mock, 2)["system"] == "You are a careful billing assistant."
    assert sent(mock, 2)["messages"] == [
        {"role": "user", "content": "Order o-1 arrived broken: refund the 20.00 on ch_1."},
        {"role": "assistant", "content": [
            {"type": "tool_use", "id": looked_up, "name": "lookup", "input": {"order_id": "o-1"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": looked_up, "content": '{"order": "o-1", "status": "shipped"}'}]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Order o-1 has shipped. I will refund 20.00 on ch_1 once a person approves it."},
            {"type": "tool_use", "id": refunded, "name": "refund", "input": {"charge_id": "ch_1", "amount": 20}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": refunded, "content": '{"refunded": 20.0, "charge": "ch_1"}'}]},
    ]
    assert [t["name"] for t in sent(mock, 2)["tools"]] == ["lookup", "refund"]
