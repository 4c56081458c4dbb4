"""LangGraph graphs whose nodes ask people through the gateway (docs/agents-anywhere.md, "LangGraph").

    from gateway.client import HitlClient
    from gateway.langgraph import HitlGraphRunner, ask_people

    def pick_plan(state):
        answer = ask_people("Which plan?", options=["Basic", "Pro"])   # parks the thread; resumed: an Answer
        return {"plan": answer.option_id or answer.text}

    runner = HitlGraphRunner(graph, HitlClient())                     # a graph compiled with a checkpointer
    runner.invoke({"customer": "c_1"}, {"configurable": {"thread_id": "ticket-7"}})

`ask_people` raises LangGraph's `interrupt()` with a request spec. The runner turns each interrupt a thread parks on
into requests (the idempotency key is the thread id and the interrupt id, so a re-run never asks twice) and resumes
the thread with `Command(resume=...)` once they close. It understands the interrupts of LangChain's
`HumanInTheLoopMiddleware` too (batched `action_requests` and per-call `tool_approval`): each action is a
tool-approval request, and its outcome a decision (`approve`, or `reject` with the person's note). An action whose
`allowed_decisions` take `edit` is an editable request, checked by the tool's argument schema where it is known (a
per-call interrupt's `response_schema`, a review config's `args_schema`, or the runner's `tools`); approved with
changes, its decision is `edit` with the approved args.

It imports only the standard library, `requests`, gateway.client and LangGraph (with langchain_core's
RunnableConfig, which LangGraph brings).
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, overload

from langchain_core.runnables import RunnableConfig
from langgraph.pregel import Pregel
from langgraph.types import Command, Interrupt, interrupt

from gateway.client import Answer, Expired, HitlClient, as_option, verify_callback

__all__ = ["Approval", "HitlGraphRunner", "Progress", "UnsupportedInterrupt", "ask_people"]

REQUEST = "hitl_request"
"""The `type` of the interrupt value `ask_people` raises."""
MAX_PROMPT = 4000
"""The longest prompt the API takes; a longer middleware description is cut to it."""
MAX_KEY = 200
"""The longest idempotency key the API takes."""
LOCKS = 64
"""How many locks a runner advances threads under (a thread id always maps to the same one)."""


class UnsupportedInterrupt(ValueError):
    """A thread parked on an interrupt the runner cannot turn into requests (the message says which and why)."""


@dataclass(frozen=True)
class Approval:
    """What `ask_people(kind="tool-approval")` returns: `approved` or not, the person's `note` (what they wrote with
    their decision, if anything), who decided (`responder`, a principal) and the closed `request`."""

    approved: bool
    note: str | None
    responder: dict[str, Any] | None
    request: dict[str, Any]


@overload
def ask_people(prompt: str, options: list[str | dict[str, Any]] | None = None, to: dict[str, Any] | None = None,
               approvers: list[str] | None = None, kind: Literal["question"] = "question", action: None = None,
               *, allow_freeform: bool = True, expires_in: int | None = None) -> Answer: ...


@overload
def ask_people(prompt: str, options: None = None, to: dict[str, Any] | None = None,
               approvers: list[str] | None = None, *, kind: Literal["tool-approval"], action: dict[str, Any],
               expires_in: int | None = None) -> Approval: ...


def ask_people(prompt: str, options: list[str | dict[str, Any]] | None = None, to: dict[str, Any] | None = None,
               approvers: list[str] | None = None, kind: str = "question", action: dict[str, Any] | None = None,
               *, allow_freeform: bool = True, expires_in: int | None = None) -> Answer | Approval:
    """Ask people from inside a graph's node, run by a HitlGraphRunner: the thread parks until they answer.

    A question (`kind="question"`, options as strings or `{id, label, description?}`) returns an Answer
    (`option_id` and `label` of the option picked, or the `text` typed, and `responder`). A tool approval
    (`kind="tool-approval"`, `action={"toolName": ..., "input": {...}}`) returns an Approval. `to`, `approvers` and
    `expires_in` are the request API's (the runner's defaults when left out). Expired when nobody answered: the
    request expired or was cancelled. ValueError for a kind or action that does not fit."""
    if kind == "question":
        if action is not None:
            raise ValueError("only a tool approval has an action")
        request: dict[str, Any] = {"kind": kind, "prompt": prompt, "allow_freeform": allow_freeform,
                                   "options": [as_option(o) for o in options] if options else None}
    elif kind == "tool-approval":
        if not action or not action.get("toolName") or options:
            raise ValueError('a tool approval has an action, {"toolName": ..., "input": {...}}, and no options')
        request = {"kind": kind, "prompt": prompt, "tool": action["toolName"], "input": action.get("input") or {}}
    else:
        raise ValueError(f"kind is question or tool-approval, not {kind!r}")
    request.update(to=to, approvers=approvers, expires_in=expires_in)
    return outcome_of(interrupt({"type": REQUEST, "request": request}))


def outcome_of(closed: Any) -> Answer | Approval:
    """What `ask_people` returns for the closed request the runner resumed it with."""
    if not isinstance(closed, dict) or "outcome" not in closed:
        raise TypeError(f"ask_people is resumed by a HitlGraphRunner with the closed request, not {closed!r}")
    if closed["outcome"] == "answered":
        return Answer.of(closed)
    if closed["outcome"] in ("approved", "denied"):
        return Approval(closed["outcome"] == "approved", (closed.get("response") or {}).get("text"),
                        closed.get("responder"), closed)
    raise Expired(closed, f"nobody answered {closed.get('prompt')!r} ({closed['outcome']})")


# -- interrupts as requests ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What one interrupt asks: the requests to open (each the client's keyword arguments, with its `kind`), and
    how their closed requests, in that order, become the interrupt's resume value."""

    asks: list[dict[str, Any]]
    resume: Callable[[list[dict[str, Any]]], Any]


def plan(pending: Interrupt, schemas: Mapping[str, dict[str, Any]] | None = None) -> Plan:
    """The requests an interrupt of `ask_people` or of LangChain's HumanInTheLoopMiddleware asks; `schemas` are the
    argument schemas of tools by name (for an editable action no interrupt gives one of)."""
    schemas = schemas or {}
    value = pending.value
    if isinstance(value, dict) and value.get("type") == REQUEST:
        return Plan([value["request"]], lambda closed: closed[0])
    if isinstance(value, dict) and "action_requests" in value and "review_configs" in value:  # batched
        configs = {config["action_name"]: config for config in value["review_configs"]}
        asks = []
        for action in value["action_requests"]:
            config = configs.get(action["name"], {})
            check_decisions(action["name"], config.get("allowed_decisions"))
            asks.append(approval_of(action, config.get("allowed_decisions"),
                                    config.get("args_schema") or schemas.get(action["name"])))
        return Plan(asks, lambda closed: {"decisions": [decision(request) for request in closed]})
    if isinstance(value, dict) and value.get("type") == "tool_approval":  # the middleware's per_call mode
        allowed = decision_types(pending.response_schema)
        check_decisions(value["name"], allowed)
        schema = edit_args_schema(pending.response_schema) or schemas.get(value["name"])
        return Plan([approval_of(value, allowed, schema)], lambda closed: decision(closed[0]))
    raise UnsupportedInterrupt(f"interrupt {pending.id} is neither ask_people's nor HumanInTheLoopMiddleware's: "
                               f"{value!r:.200}")


def check_decisions(tool: str, allowed: list[str] | None) -> None:
    """A person approves or denies a request, so the middleware must take both `approve` and `reject`."""
    if allowed is not None and not {"approve", "reject"} <= set(allowed):
        raise UnsupportedInterrupt(f"{tool}'s review allows only {allowed}: people approve or deny, so its "
                                   "allowed_decisions need approve and reject")


def decision_types(schema: dict[str, Any] | type | None) -> list[str] | None:
    """The decision types a per-call interrupt's `response_schema` (JSON Schema) takes; None when it names none."""
    if not isinstance(schema, dict):
        return None
    shapes = [schema, *schema.get("$defs", {}).values()]
    found = [s["properties"]["type"]["const"] for s in shapes if "const" in s.get("properties", {}).get("type", {})]
    return found or None


def edit_args_schema(schema: dict[str, Any] | type | None) -> dict[str, Any] | None:
    """The args an `edit` decision of a per-call interrupt's `response_schema` takes, as a JSON Schema of its own
    (with the definitions it refers to); None when it takes no edit or does not say (any object)."""
    if not isinstance(schema, dict):
        return None
    defs = schema.get("$defs", {})
    edits = [s for s in [schema, *defs.values()] if s.get("properties", {}).get("type", {}).get("const") == "edit"]
    action = edits[0]["properties"].get("edited_action", {}) if edits else {}
    action_name = str(action.get("$ref", "")).removeprefix("#/$defs/")
    args = defs.get(action_name, action).get("properties", {}).get("args")
    if not isinstance(args, dict):
        return None
    args = defs.get(str(args.get("$ref", "")).removeprefix("#/$defs/"), args)
    if not args.get("properties"):  # any object (no tool to take a schema from)
        return None
    kept = {name: shape for name, shape in defs.items()  # what the args may refer to: not the decisions' shapes
            if name != action_name and "const" not in shape.get("properties", {}).get("type", {})}
    return {**args, "$defs": kept} if kept and "$ref" in json.dumps(args) else args


def tool_schemas(tools: Iterable[Any]) -> dict[str, dict[str, Any]]:
    """The argument schemas of LangChain tools (what the model sees: `tool_call_schema`), by name."""
    found = {}
    for tool in tools:
        schema = getattr(tool, "tool_call_schema", None)
        if isinstance(schema, dict):
            found[tool.name] = schema
        elif isinstance(schema, type) and hasattr(schema, "model_json_schema"):
            found[tool.name] = schema.model_json_schema()
    return found


def approval_of(action: Mapping[str, Any], allowed: list[str] | None = None,
                schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """A middleware's action (`name`, `args`, `description`) as a tool-approval request: editable when its
    `allowed` decisions take `edit`, its edits checked by `schema` (None: any object)."""
    ask = {"kind": "tool-approval", "tool": action["name"], "input": action["args"],
           "prompt": (action.get("description") or "")[:MAX_PROMPT] or None}
    if allowed is not None and "edit" in allowed:
        ask |= {"editable": True, "input_schema": schema}
    return ask


def decision(closed: dict[str, Any]) -> dict[str, Any]:
    """A closed tool approval as the middleware's decision: approved, `approve` (approved with changes, `edit`
    with the args approved); denied, `reject` with the note as its message; expired or cancelled, `reject` saying
    nobody approved it."""
    if closed["outcome"] == "approved":
        edited = (closed.get("response") or {}).get("input")
        if edited is None:
            return {"type": "approve"}
        return {"type": "edit", "edited_action": {"name": closed["action"]["toolName"], "args": edited}}
    note = (closed.get("response") or {}).get("text") if closed["outcome"] == "denied" else \
        f"nobody approved it (the request {closed['outcome']})"
    return {"type": "reject", "message": note} if note else {"type": "reject"}


def idempotency_key(thread_id: str, interrupt_id: str, index: int) -> str:
    key = f"langgraph:{thread_id}:{interrupt_id}:{index}"
    if len(key) <= MAX_KEY:
        return key
    return f"langgraph:{hashlib.sha256(thread_id.encode()).hexdigest()}:{interrupt_id}:{index}"


@dataclass(frozen=True)
class Parked:
    """An interrupt a thread waits on, and its requests as they are now."""

    interrupt_id: str
    plan: Plan
    requests: list[dict[str, Any]]

    @property
    def open(self) -> list[dict[str, Any]]:
        return [request for request in self.requests if request["status"] == "pending"]


@dataclass(frozen=True)
class Progress:
    """Where a thread stands after `start` or `resume_from_callback`: the requests it waits on (`waiting`; none:
    the graph ended) and whether this call resumed it."""

    thread_id: str
    waiting: list[dict[str, Any]]
    resumed: bool

    @property
    def done(self) -> bool:
        return not self.waiting


# -- the runner ---------------------------------------------------------------------------------------------------


class HitlGraphRunner:
    """Runs a graph compiled with a checkpointer, asking people through `client` for each interrupt of
    `ask_people` or of HumanInTheLoopMiddleware a thread parks on.

    `to`, `approvers` and `expires_in` are the defaults of its requests (a middleware's always; `ask_people`'s
    where it gives none). `tools` (LangChain tools) give the argument schemas of the middleware's editable actions
    that its interrupts do not. With `callback_url`, every request is opened with it, so the gateway POSTs the outcome
    there: `resume_from_callback` checks the signature with `callback_secret` (default HITL_CALLBACK_SECRET) and
    resumes the thread. Keep these settings the same across runs of a thread: an idempotency key used again with
    another request body is the API's 409 `idempotency_conflict`. Each thread is advanced by one call at a time in
    this process (under a lock of its id)."""

    def __init__(self, graph: Pregel, client: HitlClient, *, to: dict[str, Any] | None = None,
                 approvers: list[str] | None = None, expires_in: int | None = None,
                 callback_url: str | None = None, callback_secret: str | None = None,
                 tools: Iterable[Any] = ()) -> None:
        self.graph, self.client = graph, client
        self.schemas = tool_schemas(tools)
        self.to, self.approvers, self.expires_in = to, approvers, expires_in
        self.callback_url, self.callback_secret = callback_url, callback_secret
        self.locks = [threading.Lock() for _ in range(LOCKS)]

    def invoke(self, input: Any, config: RunnableConfig, *, timeout: float | None = None, **kwargs: Any) -> Any:
        """Run the thread of `config` (`configurable.thread_id`) to its end: each time it parks, open its requests,
        wait for them to close, resume it with their answers. Returns what the graph's last run returned. Expired
        when `timeout` seconds pass with a request open (it stays open: `invoke(None, config)` picks the thread up
        again). A thread already parked (its process stopped waiting) is picked up where it parked, and `input` is
        not applied again: its requests are found by their idempotency keys, so nobody is asked twice. `kwargs` go
        to every `graph.invoke` (`context=...`)."""
        ends = None if timeout is None else time.monotonic() + timeout
        thread_id = thread_of(config)
        with self.lock(thread_id):
            output, parked = self.advance(config, self.begin(input, config, kwargs), kwargs)
        while parked:
            for request in [request for waiting in parked for request in waiting.open]:
                self.client.wait(request["requestId"], None if ends is None else max(ends - time.monotonic(), 0))
            with self.lock(thread_id):
                output, parked = self.advance(config, output, kwargs)
        return self.graph.get_state(config).values if output is NOT_RUN else output  # NOT_RUN: a callback ran it

    def start(self, input: Any, config: RunnableConfig, **kwargs: Any) -> Progress:
        """Run the thread until it ends or parks, open the requests it parks on, and return without waiting (for
        a runner with a `callback_url`: `resume_from_callback` goes on). A parked thread is picked up as by
        `invoke` (`resumed`: its requests had all closed meanwhile, and it went on)."""
        thread_id = thread_of(config)
        with self.lock(thread_id):
            before = self.begin(input, config, kwargs)
            output, parked = self.advance(config, before, kwargs)
        return Progress(thread_id, [r for waiting in parked for r in waiting.open], resumed=output is not before)

    def resume_from_callback(self, body: bytes | str, headers: Mapping[str, str],
                             config: RunnableConfig | None = None, **kwargs: Any) -> Progress | None:
        """Verify a callback (CallbackRefused: answer it 401) and, once every request its thread parks on is
        closed, resume the thread until it ends or parks again, opening the next requests without waiting.
        `body` is the raw body, `headers` the callback's; `config` is the base of the thread's config
        (`configurable.thread_id` comes from the request's metadata). None for a request this runner did not
        open. A callback delivered again after the thread went on resumes nothing (`resumed` False)."""
        request = verify_callback(body, headers, self.callback_secret).get("request") or {}
        origin = (request.get("metadata") or {}).get("langgraph")
        if not isinstance(origin, dict) or not isinstance(origin.get("threadId"), str):
            return None
        base = config or RunnableConfig()
        config = RunnableConfig(**{**base, "configurable": {**base.get("configurable", {}),
                                                            "thread_id": origin["threadId"]}})
        with self.lock(origin["threadId"]):
            output, parked = self.advance(config, NOT_RUN, kwargs)
        return Progress(origin["threadId"], [r for waiting in parked for r in waiting.open],
                        resumed=output is not NOT_RUN)

    # -- steps ----------------------------------------------------------------------------------------------------

    def begin(self, input: Any, config: RunnableConfig, kwargs: dict[str, Any]) -> Any:
        """Run the graph with `input`, unless the thread already parks on interrupts (NOT_RUN then)."""
        if not isinstance(input, Command) and self.graph.get_state(config).interrupts:
            return NOT_RUN
        return self.graph.invoke(input, config, **kwargs)

    def advance(self, config: RunnableConfig, output: Any, kwargs: dict[str, Any]) -> tuple[Any, list[Parked]]:
        """Resume the thread as long as every request of every interrupt it parks on is closed. Returns the last
        run's output (`output` when it did not run) and where it parks now (nothing: it ended)."""
        while True:
            parked = self.parked(config)
            if not parked or any(waiting.open for waiting in parked):
                return output, parked
            answers = {waiting.interrupt_id: waiting.plan.resume(waiting.requests) for waiting in parked}
            output = self.graph.invoke(Command(resume=answers), config, **kwargs)

    def parked(self, config: RunnableConfig) -> list[Parked]:
        """The interrupts the thread parks on, each with its requests, opened now or found by their keys."""
        thread_id = thread_of(config)
        found = []
        for pending in self.graph.get_state(config).interrupts:
            asks = plan(pending, self.schemas)
            requests = [self.open(ask, idempotency_key(thread_id, pending.id, index),
                                  {"langgraph": {"threadId": thread_id, "interruptId": pending.id, "index": index}})
                        for index, ask in enumerate(asks.asks)]
            found.append(Parked(pending.id, asks, requests))
        return found

    def open(self, ask: dict[str, Any], key: str, metadata: dict[str, Any]) -> dict[str, Any]:
        """Open one request of a plan (the same key again: the request it opened, as it is now)."""
        fields = dict(ask)
        kind = fields.pop("kind")
        common: dict[str, Any] = {
            "to": fields.pop("to", None) or self.to, "approvers": fields.pop("approvers", None) or self.approvers,
            "expires_in": fields.pop("expires_in", None) or self.expires_in, "idempotency_key": key,
            "callback_url": self.callback_url, "metadata": metadata}
        if kind == "question":
            return self.client.request_answer(**fields, **common)
        return self.client.request_approval(**fields, **common)

    def lock(self, thread_id: str) -> threading.Lock:
        """The lock a thread is advanced under (one of LOCKS: threads that share one take turns)."""
        return self.locks[int(hashlib.sha256(thread_id.encode()).hexdigest(), 16) % LOCKS]


NOT_RUN: Any = object()
"""The output of a step that did not run the graph."""


def thread_of(config: Mapping[str, Any]) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None:
        raise ValueError('the config names the thread: {"configurable": {"thread_id": ...}}')
    return str(thread_id)
