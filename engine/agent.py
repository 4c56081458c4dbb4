"""The agent definition API: `Agent`, `@tool`, `ToolContext`."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from functools import cached_property
from typing import Any, Protocol, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

from engine.answers.edits import GRANT_DIGEST, INPUT_GRANT, problems_of
from engine.answers.schedules import NO_SCHEDULE, Schedule, Seconds, schedule
from engine.answers.showing import IN_SESSION, Showing, showing
from engine.errors import ToolDefinitionError
from engine.llm import ChatModel
from engine.policies import ApprovalPolicy, ResponsePolicy, need_of, never
from engine.protocol import Principal
from engine.store.statuses import Outcome


@dataclass(frozen=True)
class Approval:
    """Who approved the call being run, and the note they gave (the app's reason when no person did: a policy's
    verdict, or "approved on timeout")."""

    request_id: str
    responder: Principal
    note: str | None = None


@dataclass(frozen=True)
class Answer:
    """A person's answer to `ctx.ask()`; `outcome` is `answered`, or `cancelled` / `ignored` / `expired`
    when the question was dismissed (the person moved on, the turn was steered, or time ran out)."""

    option_id: str | None
    text: str | None
    responder: Principal | None
    outcome: str = Outcome.ANSWERED

    @property
    def dismissed(self) -> bool:
        return self.outcome != Outcome.ANSWERED

    @property
    def value(self) -> str | None:
        """The chosen option, else the typed text."""
        return self.option_id if self.option_id is not None else self.text


class Park(BaseException):  # noqa: N818 - control flow, not an error; BaseException so tools cannot swallow it
    """Raised by `ctx.ask()` when its answer is not there yet: the runner parks the turn and reruns the tool."""


class Workflow(Protocol):
    def ask(self, prompt: str, options: list[dict[str, Any]] | None, allow_freeform: bool,
            expires_in: float | timedelta | None, schedule: Schedule, shown: Showing) -> Answer: ...

    def step(self, name: str, fn: Callable[[], Any]) -> Any: ...


@dataclass
class ToolContext:
    """What a running tool knows: where it runs, for whom (`requester`) and who approved it."""

    session_id: str
    turn_id: str
    call_id: str
    requester: Principal | None
    approval: Approval | None
    idempotency_key: str
    channel: str = "api"
    previous_attempt_may_have_run: bool = False
    workflow: Workflow | None = field(default=None, repr=False)

    def ask(self, prompt: str, options: Sequence[str | dict[str, Any]] | None = None, allow_freeform: bool = True,
            expires_in: float | timedelta | None = None, *, remind_every: Seconds | None = None,
            remind_max: int | None = None, escalate_after: Seconds | None = None, escalate_to: Any = None,
            escalate_approvers: Sequence[str] | None = None, show_to: Any = None,
            show_in_session: bool = True) -> Answer:
        """Ask a person mid-tool. The turn parks; on resume the tool runs again from the top and this
        call returns the stored answer (asks are matched by their order within the tool). Reminders and an
        escalation as ApprovalPolicy's (docs/reminders-and-timeouts.md); an expired question is dismissed. Where
        it is shown as ApprovalPolicy's `show_to` and `show_in_session` say (docs/right-people.md)."""
        if self.workflow is None:
            raise RuntimeError("ctx.ask() works only inside a running turn")
        plan = schedule("question", remind_every=remind_every, remind_max=remind_max, escalate_after=escalate_after,
                        escalate_to=escalate_to, escalate_approvers=escalate_approvers)
        shown = showing(show_to, show_in_session)
        normalized = [o if isinstance(o, dict) else {"label": o} for o in options or []]
        return self.workflow.ask(prompt, normalized or None, allow_freeform, expires_in, plan, shown)

    def step(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run `fn` once for this call and store its JSON result: a side effect before an ask never repeats."""
        if self.workflow is None:
            raise RuntimeError("ctx.step() works only inside a running turn")
        return self.workflow.step(name, fn)


MAX_APPROVAL_KEY = 200 - len(INPUT_GRANT) - GRANT_DIGEST
"""The longest approval key: a grant's key (at most 200 characters stored) may add an input's digest to it."""


class Tool:
    """A function the model may call, with its input schema and its approval policy."""

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        approval: Any = None,
        approval_key: str | None = None,
        idempotent: bool = False,
        response: ResponsePolicy | None = None,
        editable: bool = False,
    ) -> None:
        self.fn = fn
        self.name = name or fn.__name__
        self.title = title or self.name.replace("_", " ")
        self.description = description or inspect.getdoc(fn) or self.title
        self.approval_key = approval_key or self.name
        self.idempotent = idempotent
        self.schedule: Schedule = NO_SCHEDULE
        """What happens to its approvals while nobody answers (reminders, escalation, on_timeout)."""
        self.shown: Showing = IN_SESSION
        """Where its approvals are shown (show_to places, and the session's own channel or not)."""
        if isinstance(approval, ApprovalPolicy):
            self.request_policy: Callable[..., Any] = approval.request
            self.response_policy: ResponsePolicy | None = approval.response or response
            self.schedule = approval.schedule
            self.shown = approval.shown
            editable = approval.editable or editable
        else:
            self.request_policy = approval if approval is not None else never()
            self.response_policy = response
        self.needs_approval = not isinstance(self.request_policy, never)
        self.editable = editable
        """A person may approve a call with another input (which must fit this tool's)."""
        if editable and not self.needs_approval:
            raise ToolDefinitionError(f"tool {self.name}: editable=True needs an approval policy (never() asks nobody)")
        if len(self.approval_key) > MAX_APPROVAL_KEY:
            raise ToolDefinitionError(f"tool {self.name}: an approval key has at most {MAX_APPROVAL_KEY} characters")
        self.expires_in = getattr(self.request_policy, "expires_in", None)
        """How long its approvals stay open (the request policy's `expires_in`); None: until answered."""
        if self.schedule.on_timeout == "approve" and self.expires_in is None:
            raise ToolDefinitionError(f"tool {self.name}: on_timeout='approve' needs the request policy's "
                                      "expires_in (e.g. always(expires_in=3600))")
        self.takes_context, self.input_model = _input_model(fn, self.name)

    def spec(self) -> dict[str, Any]:
        """The function description the model sees (OpenAI `tools[].function`)."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}

    @cached_property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the tool's input, generated once (every model step sends it)."""
        schema = self.input_model.model_json_schema()
        schema.pop("title", None)
        return schema

    @property
    def edit_schema(self) -> dict[str, Any] | None:
        """What an editable approval shows as the input it takes (its `action.inputSchema`); None: not editable,
        nor when its approval takes several people's (they approve what was proposed: an edit would run on one
        person's word)."""
        several = self.response_policy is not None and need_of(self.response_policy) > 1
        return self.parameters if self.editable and not several else None

    def validate(self, data: dict[str, Any]) -> dict[str, Any]:
        """Check the model's input against the signature and return the arguments as the hints ask (a
        pydantic model argument arrives as that model, not as a dict); raises ValueError with a readable message."""
        try:
            return dict(self.input_model.model_validate(data))
        except ValidationError as exc:
            problems = "; ".join(f"{p['field']}: {p['problem']}" for p in problems_of(exc))
            raise ValueError(f"invalid input for {self.name}: {problems}") from exc

    def invoke(self, ctx: ToolContext, data: dict[str, Any]) -> Any:
        kwargs = self.validate(data)
        result = self.fn(ctx, **kwargs) if self.takes_context else self.fn(**kwargs)
        if inspect.isawaitable(result):
            import asyncio

            return asyncio.run(_awaited(result))
        return result


async def _awaited(awaitable: Any) -> Any:
    return await awaitable


def _input_model(fn: Callable[..., Any], name: str) -> tuple[bool, type[BaseModel]]:
    hints = get_type_hints(fn)
    params = list(inspect.signature(fn).parameters.values())
    takes_context = bool(params) and (
        hints.get(params[0].name) is ToolContext or params[0].name in ("ctx", "context")
    )
    fields: dict[str, Any] = {}
    for param in params[1:] if takes_context else params:
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise ToolDefinitionError(f"tool {name}: *args and **kwargs cannot be described to a model")
        default = ... if param.default is param.empty else param.default
        fields[param.name] = (hints.get(param.name, Any), default)
    # an argument the tool does not take is refused, never dropped: a person must not approve input the call ignores
    return takes_context, create_model(f"{name}_input", __config__=ConfigDict(extra="forbid"), **fields)


def tool(fn: Callable[..., Any] | None = None, **options: Any) -> Any:
    """Declare a tool: `@tool` or `@tool(approval=always(), idempotent=True, editable=True, ...)`."""
    if fn is not None:
        return Tool(fn, **options)
    return lambda f: Tool(f, **options)


class Agent:
    """A named model with instructions and tools.

    `response_policy` applies to requests whose tool sets none; `max_steps` (model calls per turn) makes a
    turn that runs past it park on a session-limit prompt (continue / stop).
    """

    def __init__(
        self,
        name: str,
        instructions: str,
        model: ChatModel,
        tools: list[Tool] | None = None,
        *,
        response_policy: ResponsePolicy | None = None,
        max_steps: int | None = None,
    ) -> None:
        if max_steps is not None and max_steps < 1:
            raise ToolDefinitionError(f"agent {name}: max_steps must be at least 1")
        self.name = name
        self.max_steps = max_steps
        self.instructions = instructions
        self.model = model
        self.tools = {t.name: t for t in tools or []}
        if len(self.tools) != len(tools or []):
            raise ToolDefinitionError(f"agent {name}: two tools share a name")
        self.response_policy = response_policy

    def tool_specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools.values()]
