"""Block Kit for requests: pure functions from an InputRequest to a message Slack accepts.

Every text is cut to its Block Kit limit with a marker instead of being rejected by Slack; text from the model
or a tool's input is escaped, so a prompt cannot @-mention a channel. Controls carry `hitl|<request>|<control>`
as `action_id` and an option's number as `value` (see parse.py).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from engine.answers.forms import FormField, Problem, form_fields
from engine.channels.contract import Outcome, Reminder
from engine.protocol import InputRequestOut, Option, Principal, app_reason

from .parse import ACTION_PREFIX, ANSWER_BLOCK, ANSWER_INPUT, ANSWER_VIEW, EDIT_FIELD, EDIT_INPUT, EDIT_VIEW, WHOLE

MARKER = "…"
# Block Kit limits (https://docs.slack.dev/reference/block-kit)
SECTION_TEXT = 3000
FIELDS = 10
BUTTON_TEXT = 75
OPTION_TEXT = 75
SELECT_OPTIONS = 100
PLACEHOLDER = 150
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30
MODAL_TITLE = 24
MODAL_BLOCKS = 100
INPUT_LABEL = 2000
INPUT_TEXT = 3000
CHECKBOX_TEXT = 75
OPTION_VALUE = 150
ERROR_TEXT = 150
MESSAGE_TEXT = 40000
# Readability, well inside the limits above (a field holds 2000)
INPUT_KEY = 100
INPUT_VALUE = 300
NOTE = 500

MENTIONABLE = re.compile(r"\bslack:[A-Z0-9]+:([UW][A-Z0-9]+)\b")


def escape(text: str) -> str:
    """Slack's three mrkdwn control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def cut(text: str, limit: int) -> str:
    """Plain text within `limit` characters, cut with a marker when longer."""
    return text if len(text) <= limit else text[: limit - len(MARKER)] + MARKER


def fit(text: str, limit: int) -> str:
    """Escaped mrkdwn within `limit` characters, cut with a marker (never inside an `&amp;`) when longer."""
    escaped = escape(text)
    if len(escaped) <= limit:
        return escaped
    pieces, size = [], 0
    for char in text:
        piece = escape(char)
        if size + len(piece) > limit - len(MARKER):
            break
        pieces.append(piece)
        size += len(piece)
    return "".join(pieces) + MARKER


def plain(text: str, limit: int) -> dict[str, Any]:
    return {"type": "plain_text", "text": cut(text, limit), "emoji": True}


def mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text}


def section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": mrkdwn(text)}


def person(principal: Principal | None) -> str:
    """A Slack user as a mention (Slack shows their name); anyone else by their display name."""
    if principal is None:
        return "someone"
    user_id = principal.attributes.get("userId")
    if principal.authenticator == "slack" and user_id:
        return f"<@{user_id}>"
    return escape(principal.display_name)


# -- a request's card ------------------------------------------------------------------------------------


def request_card(request: InputRequestOut) -> dict[str, Any]:
    """The card of an open request: prompt, the call's input, controls, who asked."""
    blocks = [section(fit(request.prompt, SECTION_TEXT))]
    if request.action is not None and request.action.input:
        blocks.append(input_fields(request.action.input))
    blocks.append({"type": "actions", "elements": controls(request)})
    blocks.append({"type": "context", "elements": [mrkdwn(note) for note in notes(request)]})
    return {"text": fit(request.prompt, SECTION_TEXT), "blocks": blocks}


def settled_card(request: InputRequestOut) -> dict[str, Any]:
    """The same card once the request closed: no controls, and what became of it."""
    outcome = outcome_line(request)
    blocks = [section(fit(request.prompt, SECTION_TEXT))]
    if request.action is not None and request.action.input:
        blocks.append(input_fields(request.action.input))
    blocks.append(section(outcome))
    return {"text": f"{outcome}: {fit(request.prompt, SECTION_TEXT)}", "blocks": blocks}


def input_fields(data: dict[str, Any]) -> dict[str, Any]:
    """A tool's input as at most ten `*key*` / value fields; the rest counted in the last one."""
    items = list(data.items())
    shown = items if len(items) <= FIELDS else items[: FIELDS - 1]
    fields = [mrkdwn(f"*{fit(str(key), INPUT_KEY)}*\n{fit(readable(value), INPUT_VALUE)}") for key, value in shown]
    if len(shown) < len(items):
        fields.append(mrkdwn(f"{MARKER} and {len(items) - len(shown)} more"))
    return {"type": "section", "fields": fields}


def readable(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def controls(request: InputRequestOut) -> list[dict[str, Any]]:
    """Buttons for an approval or a session limit; for a question, a menu of its options and a way to type."""
    if request.kind != "question":
        buttons = [button(request, number, option) for number, option in enumerate(request.options, start=1)]
        if request.editable and request.action is not None:  # Edit, beside Approve
            buttons.insert(1, {"type": "button", "action_id": action_id(request, "edit"),
                               "text": plain("Edit", BUTTON_TEXT), "value": "edit"})
        return buttons
    elements = [menu(request)] if request.options else []
    if request.allow_freeform:
        elements.append({"type": "button", "action_id": action_id(request, "type"),
                         "text": plain("Type an answer", BUTTON_TEXT), "value": "type"})
    return elements


def action_id(request: InputRequestOut, control: str) -> str:
    return f"{ACTION_PREFIX}{request.request_id}|{control}"


def button(request: InputRequestOut, number: int, option: Option) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "button", "action_id": action_id(request, str(number)),
                               "text": plain(option.label, BUTTON_TEXT), "value": str(number)}
    if option.style in ("primary", "danger"):
        element["style"] = option.style
    if option.style == "danger":
        element["confirm"] = {
            "title": plain("Are you sure?", CONFIRM_TITLE),
            "text": plain(f"{option.label}: {request.prompt}", CONFIRM_TEXT),
            "confirm": plain(option.label, CONFIRM_BUTTON),
            "deny": plain("Go back", CONFIRM_BUTTON),
            "style": "danger",
        }
    return element


def menu(request: InputRequestOut) -> dict[str, Any]:
    options = []
    for number, option in enumerate(request.options[:SELECT_OPTIONS], start=1):
        item: dict[str, Any] = {"text": plain(option.label, OPTION_TEXT), "value": str(number)}
        if option.description:
            item["description"] = plain(option.description, OPTION_TEXT)
        options.append(item)
    return {"type": "static_select", "action_id": action_id(request, "select"),
            "placeholder": plain("Choose an option", PLACEHOLDER), "options": options}


def notes(request: InputRequestOut) -> list[str]:
    """Who asked, until when, how many approved (of a quorum), and how to reach options the menu could not hold."""
    lines = [f"Asked by {person(request.requested_by)}"]
    if request.expires_at is not None:
        then = " (then approved automatically)" if request.on_timeout == "approve" else ""
        lines.append(f"Expires {date(request.expires_at)}{then}")
    if request.escalated_at is not None:
        lines.append(f"Escalated {date(request.escalated_at)}")
    if request.approvals is not None:
        lines.append(escape(request.approvals.progress))
    hidden = len(request.options) - SELECT_OPTIONS
    if request.kind == "question" and hidden > 0:
        lines.append(f"The menu shows the first {SELECT_OPTIONS} of {len(request.options)} options: "
                     "reply in the thread with another option's label")
    return lines


def date(at: datetime) -> str:
    """A time as Slack shows it in each reader's time zone (the ISO form where it cannot)."""
    return f"<!date^{int(at.timestamp())}^{{date_short_pretty}} at {{time}}|{at.isoformat()}>"


def outcome_line(request: InputRequestOut) -> str:
    who = person(request.responder)
    response = request.response or {}
    note = response.get("text")
    if request.outcome == Outcome.APPROVED:
        reason = app_reason(request.responder)
        if reason:
            return reason.capitalize()
        if request.approvals is not None:
            who = ", ".join(person(approver.principal) for approver in request.approvals.by)
        changes = response.get("changes")
        return f"Approved by {who}" + (f" with changes: {fit(changes, NOTE)}" if changes else "")
    if request.outcome == Outcome.DENIED:
        return f"Denied by {who}" + (f": {fit(note, NOTE)}" if note else "")
    if request.outcome == Outcome.ANSWERED:
        labels = {option.id: option.label for option in request.options}
        answer = labels.get(response.get("optionId") or "", note or "")
        return f"Answered: {fit(answer, NOTE)} (by {who})"
    return "No longer needed"


# -- other messages --------------------------------------------------------------------------------------


def message(text: str) -> dict[str, Any]:
    """An assistant message."""
    return {"text": fit(text, MESSAGE_TEXT)}


def reminder(request: InputRequestOut, sent: Reminder) -> dict[str, Any]:
    """A thread reply that mentions the people the request waits for: its requester and the approvers its
    escalation added, those of them who are Slack users."""
    people = [person(request.requested_by)] if request.requested_by and request.requested_by.authenticator == "slack" \
        else []
    people += [f"<@{match[1]}>" for approver in sent.approvers if (match := MENTIONABLE.fullmatch(approver))]
    who = " ".join(dict.fromkeys(people))
    text = f"Reminder: \"{fit(request.prompt, NOTE)}\" still waits for an answer (above)."
    return {"text": f"{who} {text}" if who else text}


def refusal(request: InputRequestOut, reason: str) -> str:
    """What a refused responder reads; Slack principals the policy names become mentions."""
    said = MENTIONABLE.sub(r"<@\1>", fit(reason, NOTE))
    return f"You can't answer \"{fit(request.prompt, NOTE)}\": {said}"


TURNED_AWAY = ("Thanks, but this was not passed on: this app acts only for people of the workspaces it serves, "
               "and you are in another organization. Nothing you send it here (messages or button clicks) is "
               "taken; ask someone of this workspace to pass it on.")
"""The ephemeral a person of another organization (a Slack Connect guest) reads, once per channel."""


def answer_modal(request: InputRequestOut, channel_id: str | None) -> dict[str, Any]:
    """The "Type an answer" modal of one request (its id, and the channel, ride in private_metadata)."""
    return {
        "type": "modal",
        "callback_id": ANSWER_VIEW,
        "private_metadata": f"{request.request_id}|{channel_id or ''}",
        "title": plain("Answer", MODAL_TITLE),
        "submit": plain("Send", MODAL_TITLE),
        "close": plain("Back", MODAL_TITLE),
        "blocks": [
            section(fit(request.prompt, SECTION_TEXT)),
            {"type": "input", "block_id": ANSWER_BLOCK, "label": plain("Your answer", INPUT_LABEL),
             "element": {"type": "plain_text_input", "action_id": ANSWER_INPUT, "multiline": True}},
        ],
    }


# -- an editable approval's "Edit" modal -------------------------------------------------------------------


def edit_modal(request: InputRequestOut, channel_id: str | None) -> dict[str, Any]:
    """One input per top-level property of the request's input schema (text, number, a select for an enum, a
    checkbox for a boolean, JSON for the rest), filled with the proposed input; submitting approves with it.
    A value too long for a text box stays as proposed, and the modal says so."""
    action = request.action
    data = action.input if action is not None else {}
    fields = form_fields(action.input_schema if action is not None else None) or [WHOLE]
    inputs: list[dict[str, Any]] = []
    kept: list[str] = []
    for field in fields[: MODAL_BLOCKS - 2]:
        block = field_block(field, data if field is WHOLE else data.get(field.name, MISSING))
        if block is None:
            kept.append(field.title)
        else:
            inputs.append(block)
    notes = ["Approving runs the call with these values, once the gateway checked them against the tool."]
    if kept:
        notes.append(f"Too long to edit here, kept as proposed: {fit(', '.join(kept), NOTE)}")
    return {
        "type": "modal",
        "callback_id": EDIT_VIEW,
        "private_metadata": f"{request.request_id}|{channel_id or ''}",
        "title": plain("Edit and approve", MODAL_TITLE),
        "submit": plain("Approve", MODAL_TITLE),
        "close": plain("Back", MODAL_TITLE),
        "blocks": [section(fit(request.prompt, SECTION_TEXT)), *inputs,
                   {"type": "context", "elements": [mrkdwn(note) for note in notes]}],
    }


MISSING = object()
"""A property the proposed input leaves out."""


def field_block(field: FormField, value: Any) -> dict[str, Any] | None:
    """The input block of one field showing the proposed `value` (MISSING: none, a checkbox then shows the
    default); None when the value does not fit in a text box."""
    element: dict[str, Any] = {"action_id": EDIT_INPUT}
    optional = not field.required
    present = value is not MISSING and value is not None
    if field.kind == "boolean":
        option = {"text": plain(field.title, CHECKBOX_TEXT), "value": "true"}
        element |= {"type": "checkboxes", "options": [option]}
        if (field.default if value is MISSING else value) is True:
            element["initial_options"] = [option]
        optional = True  # unticked is an answer too
    elif field.kind == "enum" and len(field.options) <= SELECT_OPTIONS \
            and all(len(o) <= min(OPTION_TEXT, OPTION_VALUE) for o in field.options):
        options = [{"text": plain(o, OPTION_TEXT), "value": o} for o in field.options]
        element |= {"type": "static_select", "options": options, "placeholder": plain("Choose", PLACEHOLDER)}
        if value in field.options:
            element["initial_option"] = options[field.options.index(value)]
    elif field.kind in ("number", "integer"):
        element |= {"type": "number_input", "is_decimal_allowed": field.kind == "number"}
        if present and isinstance(value, int | float) and not isinstance(value, bool):
            element["initial_value"] = json.dumps(value)
    else:
        element |= {"type": "plain_text_input", "multiline": field.kind == "json"}
        if present:
            text = value if field.kind in ("string", "enum") and isinstance(value, str) else json.dumps(value)
            if len(text) > INPUT_TEXT:
                return None
            element["initial_value"] = text
    label = f"{field.title} (JSON)" if field.kind == "json" else field.title
    return {"type": "input", "block_id": field_block_id(field), "label": plain(label, INPUT_LABEL),
            "element": element, "optional": optional}


def field_block_id(field: FormField) -> str:
    return field.name if field is WHOLE else f"{EDIT_FIELD}{field.name}"


def modal_errors(request: InputRequestOut, problems: list[Problem]) -> dict[str, str]:
    """`response_action: errors` for the edit modal: each problem at its field's input (`items.0.sku` at
    `items`), one the modal has no input for at the first input, named."""
    action = request.action
    fields = form_fields(action.input_schema if action is not None else None) or [WHOLE]
    ids = {field.name: field_block_id(field) for field in fields}
    first = next(iter(ids.values()))
    errors: dict[str, str] = {}
    for problem in problems:
        name = problem["field"].split(".")[0]
        block = ids.get(name, first)
        said = problem["problem"] if block == ids.get(name) else f"{problem['field']}: {problem['problem']}"
        errors[block] = cut(f"{errors[block]}; {said}" if block in errors else said, ERROR_TEXT)
    return errors
