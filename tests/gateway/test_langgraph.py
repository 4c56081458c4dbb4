"""gateway.langgraph with real LangGraph on PostgreSQL (its PostgresSaver beside the gateway's tables): a gateway on
a real port with a `hitl worker` that delivers signed callbacks; graphs whose nodes call ask_people, and a LangChain
`create_agent` with HumanInTheLoopMiddleware on a scripted chat model; people answer as an operator through the API.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.postgres import PostgresSaver
from langgraph.graph import START, StateGraph

from examples.agents_anywhere import langgraph_agent
from gateway.client import CallbackRefused, Expired, HitlClient
from gateway.langgraph import HitlGraphRunner, Progress, UnsupportedInterrupt, ask_people, decision
from tests.conftest import KEYS, Stack, make_stack, own_worker
from tests.support.live_server import live_server
from tests.support.services import conninfo

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
@pytest.fixture
def gateway(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Stack, HitlClient]]:
    """The gateway on PostgreSQL on a real port, with a worker that signs callbacks; a client with the agent's key."""
    queue = own_worker(request, "langgraph", HITL_CALLBACK_SECRET=SECRET)
    with make_stack(request, "postgres", tmp_path, callback_secret=SECRET, queue=queue) as stack, \
            live_server(stack.app) as url:
        yield stack, HitlClient(url, api_key=KEYS["bot:agent"])


@pytest.fixture
def saver(postgres_url: str) -> Iterator[PostgresSaver]:
    with PostgresSaver.from_conn_string(conninfo(postgres_url)) as checkpointer:
        checkpointer.setup()
        yield checkpointer


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"ticket-{uuid.uuid4().hex[:8]}"}}


def requests_of(stack: Stack) -> list[dict[str, Any]]:
    """Every request opened, oldest first."""
    found = stack.client("bob:operator").get("/api/requests").get_json()["requests"]
    return sorted(found, key=lambda r: r["createdAt"])


Response = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]
"""A response's body, or what makes it of the request answered."""


def answer(stack: Stack, response: Response, after: int = 0) -> dict[str, Any]:
    """An operator answers the oldest pending request once there is one (`after` requests were opened before)."""
    client = stack.client("bob:operator")
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        opened = requests_of(stack)
        pending = [r for r in opened if r["status"] == "pending"]
        if pending and len(opened) > after:
            body = response(pending[0]) if callable(response) else response
            answered = client.patch(f"/api/requests/{pending[0]['requestId']}", json=body)
            assert answered.status_code == 200, answered.get_json()
            return pending[0]
        time.sleep(0.05)
    raise AssertionError(f"no request to answer with {response}")


def people(stack: Stack, *responses: Response) -> threading.Thread:
    """An operator answers requests as they come, one response each, in order (from another thread)."""
    def run() -> None:
        for done, response in enumerate(responses):
            answer(stack, response, after=done)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


# -- graphs of ask_people: the example's, which asks which plan, then for a refund's approval ---------------


def test_a_thread_parks_twice_and_resumes_twice_while_invoke_waits(gateway: tuple[Stack, HitlClient],
                                                                    saver: PostgresSaver) -> None:
    stack, hitl = gateway
    config = thread()
    people(stack, {"optionId": "Pro"}, {"optionId": "deny", "text": "not this month"})

    output = HitlGraphRunner(langgraph_agent.build(saver), hitl).invoke({"customer": "c_1"}, config, timeout=30)

    assert (output["plan"], output["outcome"]) == ("Pro", "refund denied: not this month")
    question, approval = (hitl.get(r["requestId"]) for r in requests_of(stack))
    assert (question["prompt"], [o["label"] for o in question["options"]], question["outcome"]) == (
        "Which plan should c_1 move to?", ["Basic", "Pro"], "answered")
    assert (approval["action"]["toolName"], approval["action"]["input"], approval["outcome"]) == (
        "refund_charge", {"customer": "c_1", "amount": 20.0}, "denied")
    thread_id = config["configurable"]["thread_id"]
    assert [r["metadata"]["langgraph"]["threadId"] for r in (question, approval)] == [thread_id, thread_id]
    assert question["idempotencyKey"].startswith(f"langgraph:{thread_id}:")


def test_a_rerun_finds_the_request_it_opened_and_never_asks_twice(gateway: tuple[Stack, HitlClient],
                                                                 saver: PostgresSaver) -> None:
    stack, hitl = gateway
    thread_id = thread()["configurable"]["thread_id"]
    with pytest.raises(Expired):  # the process stops waiting; the thread stays parked, its request open
        HitlGraphRunner(langgraph_agent.build(saver), hitl).invoke(
            {"customer": "c_2"}, {"configurable": {"thread_id": thread_id}}, timeout=1)
    [asked] = requests_of(stack)

    people(stack, {"optionId": "Basic"}, {"optionId": "approve"})
    told = langgraph_agent.run(hitl, saver, thread_id, customer="c_2")  # the same input, run again

    assert told == "plan Basic; refunded 20.00 to c_2"
    question, approval = requests_of(stack)
    assert question["requestId"] == asked["requestId"] and approval["kind"] == "tool-approval"


def test_a_question_nobody_answered_raises_expired_in_its_node(gateway: tuple[Stack, HitlClient],
                                                              saver: PostgresSaver) -> None:
    _, hitl = gateway

    def pick_plan_or_stay(state: langgraph_agent.Ticket) -> langgraph_agent.Ticket:
        try:
            picked = ask_people("Which plan?", options=["Basic", "Pro"])
        except Expired as expired:
            return {"plan": f"unchanged ({expired.request['outcome']})"}
        return {"plan": str(picked)}

    graph = StateGraph(langgraph_agent.Ticket)
    graph.add_node("pick_plan", pick_plan_or_stay)
    graph.add_edge(START, "pick_plan")
    compiled, config = graph.compile(checkpointer=saver), thread()
    runner = HitlGraphRunner(compiled, hitl)
    [asked] = runner.start({"customer": "c_4"}, config).waiting
    hitl.cancel(asked["requestId"])

    picked_up = runner.start(None, config)  # its request closed meanwhile: it goes on
    assert (picked_up.resumed, picked_up.done) == (True, True)
    assert compiled.get_state(config).values["plan"] == "unchanged (cancelled)"


def test_a_tool_call_nobody_approved_is_rejected_telling_the_model_why() -> None:
    assert decision({"outcome": "expired"}) == {"type": "reject", "message": "nobody approved it (the request expired)"}
    assert decision({"outcome": "denied", "response": {"optionId": "deny"}}) == {"type": "reject"}


# -- callbacks -------------------------------------------------------------------------------------------------


class Receiver:
    """The agent's web endpoint for callbacks: each verified callback resumes its thread (what it received and what
    the runner answered are kept); a refused one is a 401."""

    def __init__(self) -> None:
        self.runner: HitlGraphRunner | None = None
        self.received: list[tuple[bytes, dict[str, str]]] = []
        self.progress: list[Progress | None] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the standard library's name
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                assert receiver.runner is not None
                try:
                    progress = receiver.runner.resume_from_callback(body, dict(self.headers.items()))
                except CallbackRefused:
                    self.send_response(401)
                else:
                    receiver.received.append((body, dict(self.headers.items())))
                    receiver.progress.append(progress)
                    self.send_response(204)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hitl"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count: int) -> Progress:
        deadline = time.monotonic() + 30
        while len(self.progress) < count and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(self.progress) >= count, f"{len(self.progress)} callbacks handled, not {count}"
        progress = self.progress[count - 1]
        assert progress is not None
        return progress


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    receiver = Receiver()
    yield receiver
    receiver.server.shutdown()
    receiver.server.server_close()


def test_callbacks_resume_a_thread_that_no_process_waits_for(gateway: tuple[Stack, HitlClient], saver: PostgresSaver,
                                                            receiver: Receiver) -> None:
    stack, hitl = gateway
    graph, config = langgraph_agent.build(saver), thread()
    runner = receiver.runner = HitlGraphRunner(graph, hitl, callback_url=receiver.url, callback_secret=SECRET)

    started = runner.start({"customer": "c_3"}, config)
    [question] = started.waiting
    assert (started.resumed, started.done, question["prompt"]) == (False, False, "Which plan should c_3 move to?")

    answer(stack, {"optionId": "Pro"})
    first = receiver.wait_for(1)
    [approval] = first.waiting
    assert first.resumed and approval["action"]["toolName"] == "refund_charge"
    assert graph.get_state(config).next == ("refund",)

    answer(stack, {"optionId": "approve"}, after=1)
    second = receiver.wait_for(2)
    assert (second.resumed, second.done) == (True, True)
    assert graph.get_state(config).values["outcome"] == "refunded 20.00 to c_3" and graph.get_state(config).next == ()

    body, headers = receiver.received[0]  # the first callback delivered again: the thread went on long ago
    again = runner.resume_from_callback(body, headers)
    assert again is not None and (again.resumed, again.done) == (False, True)
    with pytest.raises(CallbackRefused):
        runner.resume_from_callback(body.replace(b"Pro", b"Basic"), headers)
    assert len(requests_of(stack)) == 2


# -- LangChain's create_agent with HumanInTheLoopMiddleware ---------------------------------------------------


class ScriptedChat(BaseChatModel):
    """A chat model that asks for two refunds at once, then says what it was told of them."""

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedChat:  # type: ignore[override]
        return self

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        if results:
            reply = AIMessage(content=" | ".join(str(m.content) for m in results))
        else:
            reply = AIMessage(content="", tool_calls=[
                {"name": "refund_charge", "args": {"charge": "ch_1", "amount": 20}, "id": "call_1"},
                {"name": "refund_charge", "args": {"charge": "ch_2", "amount": 900}, "id": "call_2"}])
        return ChatResult(generations=[ChatGeneration(message=reply)])


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_an_agents_tool_approvals_are_asked_of_people(gateway: tuple[Stack, HitlClient], saver: PostgresSaver,
                                                      mode: str) -> None:
    stack, hitl = gateway
    refunded: list[str] = []

    @tool
    def refund_charge(charge: str, amount: float) -> str:
        """Refund part of a charge."""
        refunded.append(charge)
        return f"refunded {amount} on {charge}"

    model = ScriptedChat()
    review = HumanInTheLoopMiddleware(interrupt_on={"refund_charge": {"allowed_decisions": ["approve", "reject"]}},
                                      interrupt_mode=mode)  # type: ignore[arg-type]
    agent = create_agent(model, tools=[refund_charge], middleware=[review], checkpointer=saver)
    def review_refund(request: dict[str, Any]) -> dict[str, Any]:  # small refunds only
        if request["action"]["input"]["amount"] < 100:
            return {"optionId": "approve"}
        return {"optionId": "deny", "text": "too much, ask finance"}

    people(stack, review_refund, review_refund)

    output = HitlGraphRunner(agent, hitl, approvers=["alice"]).invoke(
        {"messages": [{"role": "user", "content": "refund both"}]}, thread(), timeout=30)

    assert refunded == ["ch_1"]
    told = output["messages"][-1].content.split(" | ")
    assert sorted(told) == ["User rejected the tool call for `refund_charge` with reason: too much, ask finance",
                            "refunded 20.0 on ch_1"]
    asked = [hitl.get(r["requestId"]) for r in requests_of(stack)]
    assert sorted((r["action"]["toolName"], r["action"]["input"]["charge"], r["outcome"]) for r in asked) == [
        ("refund_charge", "ch_1", "approved"), ("refund_charge", "ch_2", "denied")]
    assert all(r["prompt"].startswith("Tool execution requires approval") and r["approvers"] == ["alice"]
               for r in asked)


@pytest.mark.parametrize("mode", ["batched", "per_call"])
def test_an_action_that_allows_edit_is_approved_with_changes_checked_by_the_tools_schema(
        gateway: tuple[Stack, HitlClient], saver: PostgresSaver, mode: str) -> None:
    stack, hitl = gateway
    refunded: list[tuple[str, float]] = []

    @tool
    def refund_charge(charge: str, amount: float) -> str:
        """Refund part of a charge."""
        refunded.append((charge, amount))
        return f"refunded {amount} on {charge}"

    review = HumanInTheLoopMiddleware(interrupt_on={"refund_charge": {"allowed_decisions": ["approve", "edit",
                                                                                            "reject"]}},
                                      interrupt_mode=mode)  # type: ignore[arg-type]
    agent = create_agent(ScriptedChat(), tools=[refund_charge], middleware=[review], checkpointer=saver)
    refused: list[dict[str, Any]] = []

    def edit_refund(request: dict[str, Any]) -> dict[str, Any]:  # 900 becomes 90, after an edit that does not fit
        edited = {**request["action"]["input"], "amount": request["action"]["input"]["amount"] / 10}
        wrong = stack.client("bob:operator").patch(f"/api/requests/{request['requestId']}",
                                                   json={"optionId": "approve", "input": {**edited, "amount": "lots"}})
        refused.append({"status": wrong.status_code, **wrong.get_json()})
        return {"optionId": "approve", "input": edited}

    people(stack, {"optionId": "approve"}, edit_refund)

    # a batched interrupt gives no schema: the runner's tools do (a per-call one's response_schema has it)
    runner = HitlGraphRunner(agent, hitl, tools=[refund_charge] if mode == "batched" else ())
    output = runner.invoke({"messages": [{"role": "user", "content": "refund both"}]}, thread(), timeout=30)

    assert sorted(refunded) == [("ch_1", 20), ("ch_2", 90)]
    assert "refunded 90.0 on ch_2" in output["messages"][-1].content
    assert [(r["status"], [f["field"] for f in r["error"]["details"]["fields"]]) for r in refused] == [
        (422, ["amount"])]
    asked = [hitl.get(r["requestId"]) for r in requests_of(stack)]
    assert all(r["editable"] and r["action"]["inputSchema"]["properties"]["amount"] == {"title": "Amount",
                                                                                        "type": "number"}
               for r in asked)
    edited = next(r for r in asked if r["action"]["input"]["charge"] == "ch_2")
    assert (edited["action"]["input"]["amount"], edited["response"]["input"]["amount"]) == (900, 90)


def test_an_edited_approval_is_the_middlewares_edit_decision() -> None:
    closed = {"outcome": "approved", "action": {"toolName": "refund_charge", "input": {"amount": 900}},
              "response": {"optionId": "approve", "input": {"amount": 90}}}
    assert decision(closed) == {"type": "edit", "edited_action": {"name": "refund_charge", "args": {"amount": 90}}}
    assert decision({**closed, "response": {"optionId": "approve"}}) == {"type": "approve"}


def test_a_review_that_people_could_not_answer_is_refused_before_anyone_is_asked(
        gateway: tuple[Stack, HitlClient], saver: PostgresSaver) -> None:
    stack, hitl = gateway

    @tool
    def refund_charge(charge: str, amount: float) -> str:
        """Refund part of a charge."""
        return "refunded"

    review = HumanInTheLoopMiddleware(interrupt_on={"refund_charge": {"allowed_decisions": ["approve", "edit"]}})
    agent = create_agent(ScriptedChat(), tools=[refund_charge], middleware=[review], checkpointer=saver)

    with pytest.raises(UnsupportedInterrupt, match="refund_charge's review allows only"):
        HitlGraphRunner(agent, hitl).invoke({"messages": [{"role": "user", "content": "refund"}]}, thread())

    assert requests_of(stack) == []
