"""A request's options and what picks one (DESIGN.md rule 6), in one place: the built-in options, the synonyms
an option id answers to, the labels text channels show instead, which request a typed reply answers, which
option a line of text picks, and which option and text a response names.

Of the store it imports only the statuses: engine/store/storage.py stores the built-in options as tokens and
reads them from here, so the options have no other home."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.errors import InvalidInput
from engine.protocol import InputRequestOut, InputResponse, Principal
from engine.store.statuses import Outcome

if TYPE_CHECKING:
    from engine.store.tables import InputRequest

APPROVE = {"id": "approve", "label": "Approve", "style": "primary"}
DENY = {"id": "deny", "label": "Deny", "style": "danger"}
CONTINUE = {"id": "continue", "label": "Continue", "style": "primary"}
STOP = {"id": "stop", "label": "Stop", "style": "danger"}
BUILT_IN_OPTIONS = {"approve": APPROVE, "cancel": DENY, "continue": CONTINUE, "stop": STOP}
"""The built-in options by the token stored for each. Deny is stored as `cancel`, its id while it read Cancel:
rows written before and after the rename read the same (as Deny here, as Cancel in a release before it, whose
processes may still run during a deploy)."""

OPTION_SYNONYMS = {"cancel": "deny", "deny": "cancel"}
"""A tool approval's refusal is `deny`; it was `cancel` while it read Cancel, and either id answers either (a
request opened then, a Slack card posted then, a client written then)."""

TEXT_LABELS = {"stop": "Stop here"}
"""SMS treats STOP (and CANCEL) as opt-out keywords: text channels never ask anyone to reply `stop`."""

DENIAL = re.compile(r"^(cancel|deny)\b[\s:,-]*(?P<note>.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Reply:
    """What a typed reply means for one request: an option (with a note for a denial) or free text."""

    option_id: str | None
    text: str | None


def text_label(option_id: str, label: str) -> str:
    """The label a text channel shows for an option (`Stop here` for `stop`)."""
    return TEXT_LABELS.get(option_id, label)


def option_named(ids: Iterable[str], given: str) -> str | None:
    """The id among `ids` that `given` names: itself (case-insensitive), else its synonym; None when none."""
    known = list(ids)
    for wanted in (given.lower(), OPTION_SYNONYMS.get(given.lower())):
        match = next((i for i in known if i.lower() == wanted), None)
        if match is not None:
            return match
    return None


def match_reply(options: list[dict[str, Any]], allow_freeform: bool, text: str, *, notes: bool) -> Reply | None:
    """Match after trimming: option id (case-insensitive), then label (or the one text channels show instead,
    like "Stop here"), then a 1-based number written only with digits, then free text where allowed.
    `cancel <note>` / `deny <note>` carry a denial note where the request takes one (`notes`: a tool approval;
    a question's options, even one named deny, take no note). None: no match."""
    typed = text.strip()
    if not typed:
        return None
    ids = [option["id"] for option in options]
    named = option_named(ids, typed)
    if named is not None:
        return Reply(named, None)
    for option in options:
        shown = text_label(option["id"], option["label"])
        if typed.lower() in (option["label"].strip().lower(), shown.lower()):
            return Reply(option["id"], None)
    if typed.isascii() and typed.isdigit() and 1 <= int(typed) <= len(options):
        return Reply(options[int(typed) - 1]["id"], None)
    denial = DENIAL.match(typed)
    deny = option_named(ids, "deny")
    if notes and denial and deny is not None:
        return Reply(deny, denial.group("note").strip() or None)
    if allow_freeform:
        return Reply(None, typed)
    return None


def typed_response(request: InputRequest | InputRequestOut, text: str, *,
                   allow_freeform: bool | None = None) -> InputResponse | None:
    """The response typed `text` gives `request` (`match_reply`), or None when it picks nothing.
    `allow_freeform=False`: only a pick of its options counts (a late answer to a prompt that closed)."""
    options = [o if isinstance(o, dict) else o.model_dump() for o in request.options]
    freeform = request.allow_freeform if allow_freeform is None else allow_freeform
    reply = match_reply(options, freeform, text, notes=request.kind == "tool-approval")
    if reply is None:
        return None
    return InputResponse(request_id=request.request_id, option_id=reply.option_id, text=reply.text)


def typed_answer(open_requests: Sequence[InputRequest], text: str, principal: Principal | None
                 ) -> InputResponse | None:
    """A typed reply answers only the first open request (a session-limit prompt first, else the earliest: the
    order of `open_shown_in`); a policy-gated approval never by unverified text (no principal)."""
    if not open_requests:
        return None
    first = open_requests[0]
    if first.kind == "tool-approval" and principal is None:
        return None
    return typed_response(first, text)


def outcome_of(kind: str, option_id: str | None) -> Outcome:
    """How a request of `kind` settles when `option_id` (or free text: None) is picked."""
    if kind == "tool-approval":
        return Outcome.APPROVED if option_id == "approve" else Outcome.DENIED
    return Outcome.ANSWERED


def read_response(request: InputRequest, response: InputResponse) -> tuple[str | None, str | None]:
    """The option a response names (synonyms resolved, case-insensitive) and its text, or InvalidInput: a
    question takes exactly one of an option and free text (where allowed); an approval takes an option, and text
    only as a denial's note."""
    text = response.text.replace("\x00", "").strip() if response.text is not None else None
    text = text or None
    option_id = None
    if response.option_id is not None:
        ids = [o["id"] for o in request.options]
        match = option_named(ids, response.option_id)
        if match is None:
            raise InvalidInput(
                f"request {request.request_id} has no option {response.option_id!r}",
                {"requestId": request.request_id, "options": ids},
            )
        option_id = match
    if request.kind == "question":
        if (option_id is None) == (text is None):
            raise InvalidInput("answer a question with exactly one of optionId or text",
                               {"requestId": request.request_id})
        if text is not None and not request.allow_freeform:
            raise InvalidInput("this question takes one of its options", {"requestId": request.request_id})
    else:
        if option_id is None:
            raise InvalidInput(f"a {request.kind} request needs an optionId",
                               {"requestId": request.request_id, "options": [o["id"] for o in request.options]})
        if text is not None and outcome_of(request.kind, option_id) != Outcome.DENIED:
            raise InvalidInput("text is only accepted as a note with deny", {"requestId": request.request_id})
    return option_id, text
