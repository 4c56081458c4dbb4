"""Prompts, settled prompts, messages and refusals as GitHub comments (Markdown).

The text of a request is the engine's `render_text`, shared with every text channel; this module adds the
GitHub way to answer and keeps text we did not write (the model's prompt, tool input) from notifying anyone.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from engine.answers.forms import Problem, form_fields
from engine.channels.contract import QueuePosition, render_progress, render_reminder, render_settled, render_text
from engine.protocol import InputRequestOut, Principal

MAX_BODY = 65_000
"""GitHub refuses comment bodies over 65,536 characters."""

INPUT_LIMIT = 500
"""A comment has room for more of a tool call's input than an SMS."""

MENTION = re.compile(r"@(?=[A-Za-z0-9])")


def quiet_mentions(text: str) -> str:
    """`@name` -> `@\u200bname`: shown the same, but GitHub notifies nobody."""
    return MENTION.sub("@\u200b", text)


def fit(text: str) -> str:
    return text if len(text) <= MAX_BODY else text[: MAX_BODY - 1] + "…"


def how_to_answer(request: InputRequestOut) -> str:
    if request.kind == "tool-approval":
        fields = form_fields(request.action.input_schema) if request.editable and request.action else []
        if fields:
            return (f"Reply `/approve`, `/approve {fields[0].name}=<value>` to change fields first (as `name=value`, "
                    "right after `/approve`), or `/deny <note>`.")
        return "Reply `/approve` or `/deny <note>`."
    own_words = " or `/answer <your own words>`" if request.allow_freeform else ""
    return f"Reply `/answer <n>`{own_words}."


def render_prompt(request: InputRequestOut, position: QueuePosition) -> str:
    """The request as a comment: prompt, the call's input, numbered options, how to answer."""
    return fit(quiet_mentions(render_text(request, position, how_to_answer(request), INPUT_LIMIT)))


def render_settled_prompt(request: InputRequestOut) -> str:
    """The same comment once the request closed: the how-to line gives way to the outcome and who answered."""
    return fit(quiet_mentions(render_text(request, QueuePosition(1, 1), f"**{render_settled(request)}**",
                                          INPUT_LIMIT)))


def render_reminder_comment(request: InputRequestOut, approvers: Sequence[str] = ()) -> str:
    """A reminder that mentions who asked (when they are a GitHub user: they are notified) and the `approvers`
    (logins), and says how to answer the prompt above."""
    requester = request.requested_by
    login = requester.attributes.get("login") if requester and requester.authenticator == "github" else None
    who = " ".join(f"@{name}" for name in dict.fromkeys([*([login] if login else []), *approvers]))
    text = quiet_mentions(render_reminder(request, how_to_answer(request), INPUT_LIMIT))
    return fit(f"{who} {text}" if who else text)


def render_message(text: str) -> str:
    return fit(quiet_mentions(text))


def render_progress_comment(request: InputRequestOut) -> str:
    """The count of an approval that takes several people (no one mentioned)."""
    return fit(quiet_mentions(render_progress(request)))


def render_refusal(request: InputRequestOut, responder: Principal, reason: str) -> str:
    """A reply that mentions the refused person (they are told) and gives the policy's reason."""
    login = responder.attributes.get("login")
    who = f"@{login}" if login else responder.display_name
    return fit(f"{who} " + quiet_mentions(f"your answer to “{request.prompt}” was not accepted: {reason}"))


def render_refused_edit(login: str, request: InputRequestOut, problems: list[Problem]) -> str:
    """The reply to an `/approve` whose fields do not fit: nothing was approved, and why."""
    listed = "; ".join(f"`{p['field']}`: {p['problem']}" for p in problems)
    return fit(f"@{login} " + quiet_mentions(f"your `/approve` of “{request.prompt}” was not applied, and nothing was "
                                             f"approved: {listed}"))


def render_turned_away(login: str, floor: str | None) -> str:
    """The reply to someone whose comments the bot ignores: below `floor` (GITHUB_MIN_PERMISSION), or (None)
    whose access GitHub could not tell."""
    if floor is None:
        why = ("GitHub could not tell me what access you have to this repository just now. "
               "Please comment again in a minute.")
    else:
        why = f"only collaborators with {floor} access (or more) to this repository may use this bot."
    return fit(f"@{login} thanks for your comment; it was not passed on: {why}")
