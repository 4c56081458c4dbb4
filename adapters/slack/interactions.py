"""Slack's interactivity in, engine terms out: who clicked which control of which request (block_actions), what
they typed into the "Type an answer" modal or changed in the "Edit" modal (view_submission).

Controls carry `hitl|<request id>|<control>` as their `action_id` and an option's number as their `value`:
opaque ids, never authority (the principal comes from the signed payload's `user`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field

from engine.answers.forms import Problem, edited, form_fields
from engine.protocol import InputRequestOut, Principal

from .body import Id
from .errors import SlackParseError
from .parse import (
    ACTION_PREFIX,
    ANSWER_BLOCK,
    ANSWER_INPUT,
    ANSWER_VIEW,
    EDIT_FIELD,
    EDIT_INPUT,
    EDIT_VIEW,
    WHOLE,
    WHOLE_INPUT,
    Payload,
    model,
    slack_principal,
)


class User(Payload):
    id: Id
    team_id: Id | None = None
    username: str | None = None
    name: str | None = None


class Identified(Payload):
    id: Id


class Container(Payload):
    channel_id: Id | None = None
    message_ts: Id | None = None


class Posted(Payload):
    """The message a control was on (its `thread_ts` when it is in a thread)."""

    thread_ts: Id | None = None


class SelectedOption(Payload):
    value: str


class Action(Payload):
    action_id: Id
    action_ts: Id
    value: str | None = None
    selected_option: SelectedOption | None = None


class Interaction(Payload):
    user: User
    team: Identified | None = None
    enterprise: Identified | None = None

    def principal(self, channel_id: str | None) -> Principal:
        team = self.user.team_id or (self.team.id if self.team else None)
        if not team:
            raise SlackParseError("the payload names no team for its user")
        return slack_principal(self.user.id, team, channel_id, self.enterprise.id if self.enterprise else None,
                               self.user.username or self.user.name)


class BlockActions(Interaction):
    type: Literal["block_actions"]
    actions: list[Action] = Field(min_length=1)
    container: Container = Container()
    channel: Identified | None = None
    trigger_id: Id | None = None
    message: Posted | None = None


@dataclass(frozen=True)
class Click:
    """A person used a control of a request's card: picked option number `position`, or (None) asked for a
    modal, to type an answer (`control` "type") or to edit an approval's input ("edit"); `thread_ts` is the
    card's thread ("" for a card outside one)."""

    external_id: str
    principal: Principal
    request_id: str
    position: int | None
    channel_id: str | None
    trigger_id: str | None
    control: str = ""
    thread_ts: str = ""


def parse_block_actions(body: dict[str, Any]) -> Click:
    """The click; its id (action_ts + user + action id) tells a replayed request from a second click."""
    payload = model(BlockActions, body)
    action = payload.actions[0]
    prefix, _, rest = action.action_id.partition("|")
    request_id, _, control = rest.partition("|")
    if f"{prefix}|" != ACTION_PREFIX or not request_id or not control:
        raise SlackParseError(f"not one of this gateway's controls: {action.action_id!r}")
    value = action.selected_option.value if action.selected_option else action.value
    position = None if control in MODALS else option_number(value)
    channel = payload.container.channel_id or (payload.channel.id if payload.channel else None)
    thread = payload.message.thread_ts if payload.message else None
    return Click(f"{action.action_ts}:{payload.user.id}:{action.action_id}", payload.principal(channel),
                 request_id, position, channel, payload.trigger_id, control, thread or "")


MODALS = ("type", "edit")
"""The controls that open a modal instead of picking an option."""


def option_number(value: str | None) -> int:
    if not value or not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise SlackParseError(f"an option value is a number from 1, not {value!r}")
    return int(value)


class InputValue(Payload):
    value: str | None = None
    selected_option: SelectedOption | None = None
    selected_options: list[SelectedOption] | None = None

    @property
    def given(self) -> str | bool | None:
        """What the person left in the element: a checkbox group's whether any is ticked, a select's value, a
        text or number box's text (None when empty)."""
        if self.selected_options is not None:
            return bool(self.selected_options)
        return self.selected_option.value if self.selected_option else self.value


class ViewState(Payload):
    values: dict[str, dict[str, InputValue]] = {}


class View(Payload):
    id: Id
    callback_id: Id
    private_metadata: str = ""
    state: ViewState = ViewState()


class ViewSubmission(Interaction):
    type: Literal["view_submission"]
    view: View


@dataclass(frozen=True)
class Typed:
    """A person's answer typed into the "Type an answer" modal of one request."""

    external_id: str
    principal: Principal
    request_id: str
    text: str


def parse_view_submission(body: dict[str, Any]) -> Typed:
    payload = model(ViewSubmission, body)
    request_id, _, channel = payload.view.private_metadata.partition("|")
    answer = payload.view.state.values.get(ANSWER_BLOCK, {}).get(ANSWER_INPUT)
    if payload.view.callback_id != ANSWER_VIEW or not request_id or answer is None or not answer.value:
        raise SlackParseError("not a submitted answer of this gateway's modal")
    return Typed(f"view:{payload.view.id}", payload.principal(channel or None), request_id, answer.value)


@dataclass(frozen=True)
class EditSubmission:
    """A person's edit of an approval's input, from its "Edit" modal: what each field holds (by property name; a
    checkbox as True/False), or the whole input's JSON text."""

    external_id: str
    principal: Principal
    request_id: str
    values: dict[str, str | bool | None]
    whole: str | None


def parse_edit_submission(body: dict[str, Any]) -> EditSubmission:
    payload = model(ViewSubmission, body)
    request_id, _, channel = payload.view.private_metadata.partition("|")
    if payload.view.callback_id != EDIT_VIEW or not request_id:
        raise SlackParseError("not a submitted edit of this gateway's modal")
    values: dict[str, str | bool | None] = {}
    whole = None
    for block_id, elements in payload.view.state.values.items():
        element = elements.get(EDIT_INPUT)
        if element is None:
            continue
        if block_id == WHOLE_INPUT:
            whole = element.value
        elif block_id.startswith(EDIT_FIELD):
            values[block_id.removeprefix(EDIT_FIELD)] = element.given
    return EditSubmission(f"view:{payload.view.id}", payload.principal(channel or None), request_id, values, whole)


def edited_input(submission: EditSubmission, request: InputRequestOut) -> tuple[dict[str, Any], list[Problem]]:
    """The input a submitted edit approves, typed by the request's schema, with what could not be typed. A
    checkbox left as the modal showed it leaves its property as proposed (unticked is not "set to false")."""
    proposed = request.action.input if request.action is not None else {}
    fields = form_fields(request.action.input_schema if request.action is not None else None)
    if not fields:  # the whole input, as JSON
        whole, problems = edited([WHOLE], {}, {WHOLE.name: submission.whole})
        if not problems and not isinstance(whole.get(WHOLE.name), dict):
            problems = [{"field": WHOLE.name, "problem": "expected a JSON object"}]
        return (proposed, problems) if problems else (whole[WHOLE.name], [])
    given: dict[str, str | None] = {}
    for field in fields:
        if field.name not in submission.values:
            continue  # not in the modal (too long to edit there): as proposed
        value = submission.values[field.name]
        if isinstance(value, bool):
            if value != (proposed.get(field.name, field.default) is True):
                given[field.name] = str(value).lower()
        else:
            given[field.name] = value
    return edited(fields, proposed, given)
