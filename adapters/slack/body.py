"""A verified request body, read before Bolt reads it: what Bolt could not read is refused here (a 400 at the
edge), never a failure inside Bolt (a 500).

Bolt reads every payload before any listener runs: the body as UTF-8 text, JSON or a form, then ids from the
payload's top level and from its `event`, `item`, `message`..., each assumed to be of the type Slack sends (an
id a string, an object a dict). A payload whose parts Bolt reads are of another type is refused; everything
else is left to Bolt and the listeners (whose own models ignore what they do not read).
"""

from __future__ import annotations

import json
from typing import Annotated, Any
from urllib.parse import parse_qsl

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from .errors import SlackParseError

Id = Annotated[str, Field(max_length=255, pattern=r"^[!-~]*$")]
"""A Slack id, timestamp, action or callback id: printable ASCII, as Slack writes them (never NUL, never a
character a database or a URL would choke on), at most 255 characters (Slack's longest, an `action_id`)."""


class Shape(BaseModel):
    """Read what Bolt reads, leave the rest (Slack adds fields without notice)."""

    model_config = ConfigDict(extra="ignore")


class Named(Shape):
    """`{id: ...}`: a team, an enterprise, a user or a channel given as an object."""

    id: Id | None = None
    team_id: Id | None = None
    enterprise_id: Id | None = None


class Installation(Shape):
    """An `authorizations[]` item."""

    team_id: Id | None = None
    enterprise_id: Id | None = None
    is_enterprise_install: bool | str | None = None


class ViewShape(Shape):
    type: Id | None = None
    callback_id: Id | None = None
    team_id: Id | None = None
    app_installed_team_id: Id | None = None


class ActionShape(Shape):
    action_id: Id
    block_id: Id | None = None


class ResponseUrl(Shape):
    response_url: str | None = None


NOT_NULL = ("event", "item", "message", "previous_message", "assistant_thread", "view", "actions",
            "authorizations", "response_urls")
"""Parts Bolt reads whenever they are present: `null` there fails Bolt as surely as a wrong type."""


class Scope(Shape):
    """The ids Bolt reads from a payload and, the same way, from the objects nested in it."""

    type: Id | None = None
    subtype: Id | None = None
    channel_type: Id | None = None
    tab: Id | None = None
    bot_id: Id | None = None
    thread_ts: Id | None = None
    enterprise_id: Id | None = None
    team_id: Id | None = None
    user_id: Id | None = None
    channel_id: Id | None = None
    user_team: Id | None = None
    context_team_id: Id | None = None
    context_enterprise_id: Id | None = None
    function_execution_id: Id | None = None
    callback_id: Id | None = None
    enterprise: Id | Named | None = None
    team: Id | Named | None = None
    user: Id | Named | None = None
    channel: Id | Named | None = None
    is_enterprise_install: bool | str | None = None
    is_ext_shared_channel: bool | None = None
    authorizations: list[Installation] | None = None
    event: Scope | None = None
    item: Scope | None = None
    message: Scope | None = None
    previous_message: Scope | None = None
    assistant_thread: Scope | None = None
    view: ViewShape | None = None
    actions: list[ActionShape] | None = Field(None, min_length=1)
    response_url: str | None = None
    response_urls: list[ResponseUrl] | None = None
    function_data: dict[str, Any] | None = None

    @model_validator(mode="before")
    @classmethod
    def _present_means_given(cls, data: Any) -> Any:
        if isinstance(data, dict) and any(name in data and data[name] is None for name in NOT_NULL):
            raise ValueError("a part of the payload is null")
        return data


def read_body(body: bytes, content_type: str | None) -> dict[str, Any]:
    """The payload of a verified request body, read the way Bolt reads it: JSON when the content type says so or
    it starts with `{` (the Events API), else the JSON in a form's `payload` (interactivity), else a form.
    Raises SlackParseError for a body that is not UTF-8, not JSON where JSON is due, JSON that is not an object,
    or a payload whose parts Bolt reads are not of the types Slack sends."""
    try:
        text = body.decode()
        if (content_type or "").split(";")[0] == "application/json" or text.startswith("{"):
            payload = json.loads(text) if text else {}
        elif "payload" in text:
            payload = json.loads(dict(parse_qsl(text, keep_blank_values=True)).get("payload") or "{}")
        else:
            return dict(parse_qsl(text, keep_blank_values=True))
    except UnicodeDecodeError as exc:
        raise SlackParseError("the body is not UTF-8") from exc
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError; RecursionError: nested too deep
        raise SlackParseError(f"the body is not a Slack payload: JSON, or a form whose `payload` is JSON ({exc})") \
            from exc
    if not isinstance(payload, dict):
        raise SlackParseError(f"the payload is a JSON {type(payload).__name__}, not an object")
    try:
        Scope.model_validate(payload)
    except ValidationError as exc:
        raise SlackParseError(f"a Slack payload with parts of the wrong type: {exc.error_count()} problem(s)") \
            from exc
    return payload
