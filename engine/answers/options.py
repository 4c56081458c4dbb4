"""Typed replies (DESIGN.md rule 6): which option, if any, a line of text picks for a request."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from engine.answers.input_requests import option_named
from engine.channels.contract import TEXT_LABELS

DENIAL = re.compile(r"^(cancel|deny)\b[\s:,-]*(?P<note>.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class Reply:
    """What a typed reply means for one request: an option (with a note for a denial) or free text."""

    option_id: str | None
    text: str | None


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
        shown = TEXT_LABELS.get(option["id"], option["label"])  # the label a text channel showed
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
