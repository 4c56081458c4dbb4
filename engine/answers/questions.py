"""`ask_question`: the built-in tool that lets the model ask a person something mid-turn."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, Field

from engine.agent import Tool, ToolContext
from engine.answers.schedules import Seconds, schedule
from engine.answers.showing import showing
from engine.policies import ResponsePolicy


class QuestionOption(BaseModel):
    label: str = Field(min_length=1, max_length=150)
    description: str | None = Field(None, max_length=500)


def ask_question(response: ResponsePolicy | None = None, expires_in: float | timedelta | None = None, *,
                 remind_every: Seconds | None = None, remind_max: int | None = None,
                 escalate_after: Seconds | None = None, escalate_to: Any = None,
                 escalate_approvers: Sequence[str] | None = None, show_to: Any = None,
                 show_in_session: bool = True) -> Tool:
    """The opt-in `ask_question` tool: `tools=[ask_question()]`.

    The model calls it with `{question, options?}` (0 or 2-3 options with unique labels; free text is
    always allowed). It returns `{status: "answered", answer}`, `{status: "dismissed"}` (the person moved
    on, or it expired) or `{status: "unavailable"}` (nobody can answer this session). Its questions are
    reminded, escalated and shown as `ctx.ask()`'s keywords say (docs/reminders-and-timeouts.md,
    docs/right-people.md).
    """
    timing: dict[str, Any] = {"remind_every": remind_every, "remind_max": remind_max, "escalate_after": escalate_after,
                              "escalate_to": escalate_to, "escalate_approvers": escalate_approvers,
                              "show_to": show_to, "show_in_session": show_in_session}
    # a mistake fails here, where the agent is defined, not when the model asks
    schedule("question", remind_every=remind_every, remind_max=remind_max, escalate_after=escalate_after,
             escalate_to=escalate_to, escalate_approvers=escalate_approvers)
    showing(show_to, show_in_session)

    def ask(ctx: ToolContext, question: str, options: list[QuestionOption] | None = None) -> dict[str, Any]:
        """Ask the user a question and wait for the answer. Give 2-3 options when there are obvious
        choices (each a short label and an optional description); the user may always type an answer."""
        choices = [o.model_dump(exclude_none=True) for o in options or []]
        labels = [c["label"].strip().lower() for c in choices]
        if choices and not 2 <= len(choices) <= 3:
            raise ValueError("give either no options or 2 to 3 options")
        if len(set(labels)) != len(labels):
            raise ValueError("option labels must be unique")
        if not question.strip():
            raise ValueError("the question is empty")
        if ctx.requester is not None and ctx.requester.authenticator == "app" and ctx.channel == "api":
            return {"status": "unavailable"}
        answer = ctx.ask(question, choices or None, allow_freeform=True, expires_in=expires_in, **timing)
        if answer.dismissed:
            return {"status": "dismissed"}
        return {"status": "answered", "answer": answer.value}

    return Tool(ask, name="ask_question", title="question", response=response)
