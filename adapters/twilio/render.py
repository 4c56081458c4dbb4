"""SMS text: prompts from engine.channels.contract.render_text, kept within two segments; confirmations; refusals.

An SMS is sent as GSM-7 (160 septets, 153 per part once split) unless one character is outside the GSM-7
tables (an emoji, a smart quote): then the whole message is UCS-2 (70 UTF-16 units, 67 per part). Long tool
input, questions, option labels and descriptions are cut with a GSM-7 marker so a prompt stays within two
segments. WhatsApp has no segments: its prompts are cut only to Twilio's body limit, and need not avoid the
words Twilio acts on by SMS.
"""

from __future__ import annotations

from collections.abc import Callable

from engine.answers.options import text_label
from engine.channels.contract import QueuePosition, render_progress, render_reminder, render_settled, render_text
from engine.protocol import InputRequestOut

from .parse import KEYWORDS

GSM7_BASIC = frozenset(
    "@£$¥èéùìòÇ\nØø\rÅåΔ_ΦΓΛΩΠΨΣΘΞÆæßÉ !\"#¤%&'()*+,-./0123456789:;<=>?"
    "¡ABCDEFGHIJKLMNOPQRSTUVWXYZÄÖÑÜ§¿abcdefghijklmnopqrstuvwxyzäöñüà"
)
GSM7_EXTENSION = frozenset("\f^{}\\[~]|€")
"""Sent as ESC + a character: two septets each."""

SINGLE = {"GSM-7": 160, "UCS-2": 70}
PART = {"GSM-7": 153, "UCS-2": 67}
MAX_BODY = 1600
"""Twilio's limit on a message body, in characters."""
PROMPT_SEGMENTS = 2
MARKER = "..."
"""GSM-7, unlike "…", which would switch the whole message to UCS-2."""


def encoding(text: str) -> str:
    return "GSM-7" if all(c in GSM7_BASIC or c in GSM7_EXTENSION for c in text) else "UCS-2"


def segments(text: str) -> int:
    """How many SMS segments `text` is sent as. A character is never split across two parts (an escaped
    GSM-7 character, or a UTF-16 surrogate pair)."""
    scheme = encoding(text)
    if scheme == "GSM-7":
        sizes = [2 if c in GSM7_EXTENSION else 1 for c in text]
    else:
        sizes = [len(c.encode("utf-16-le")) // 2 for c in text]
    if sum(sizes) <= SINGLE[scheme]:
        return 1
    parts, used = 1, 0
    for size in sizes:
        if used + size > PART[scheme]:
            parts, used = parts + 1, 0
        used += size
    return parts


def cut(text: str, limit: int) -> str:
    """`text`, or its first characters and the marker, at most `limit` characters."""
    return text if len(text) <= limit else text[: max(limit - len(MARKER), 0)] + MARKER


def how_to_answer(request: InputRequestOut, whatsapp: bool = False) -> str:
    """One line on how to answer: numbers first. By SMS never CANCEL, YES or STOP: Twilio reads those as
    opt-out/in, so when an option's label is such a word the line asks for the option's number."""
    numbers = len(request.options)
    if request.kind == "tool-approval":
        return "Reply 1 or 2 (or approve / deny)."
    if not numbers:
        return "Reply with your answer."
    keyword = not whatsapp and any(text_label(o.id, o.label).strip().upper() in KEYWORDS
                                   for o in request.options)
    if request.allow_freeform and not keyword:
        return "Reply with a number or your answer."
    choose = "Reply 1 or 2" if numbers == 2 else f"Reply with a number from 1 to {numbers}"
    if keyword:
        choose += " (the number, not the word)"
    return f"{choose} or your answer." if request.allow_freeform else f"{choose}."


def render_prompt(request: InputRequestOut, position: QueuePosition, whatsapp: bool = False) -> str:
    """The request as an SMS within two segments (a WhatsApp message within the body limit), cutting the input,
    question, labels and descriptions evenly (labels too: long ones would otherwise leave the question a few
    letters; a number still picks the option)."""
    def at(budget: int) -> str:
        options = [o.model_copy(update={"label": cut(o.label, budget),
                                        "description": cut(o.description, budget) if o.description else None})
                   for o in request.options]
        shorter = request.model_copy(update={"prompt": cut(request.prompt, budget), "options": options})
        return render_text(shorter, position, how_to_answer(request, whatsapp), input_limit=budget, marker=MARKER)

    return within(at, PROMPT_SEGMENTS, whatsapp)


def render_reminder_sms(request: InputRequestOut, whatsapp: bool = False) -> str:
    """A reminder of the prompt on the person's screen, in one segment: "Reminder: Approve refund? Reply 1 or 2
    (or approve / deny)." (the prompt cut to fit)."""
    how = how_to_answer(request, whatsapp)
    return within(lambda budget: render_reminder(request, how, budget, MARKER), 1, whatsapp)


def within(text_at: Callable[[int], str], parts: int, whatsapp: bool) -> str:
    """`text_at(budget)` for the largest budget (of characters its text cuts to) that fits in `parts` segments
    (on WhatsApp: the body limit)."""
    def fits(text: str) -> bool:
        return len(text) <= MAX_BODY if whatsapp else segments(text) <= parts

    low, high = 2 * len(MARKER), MAX_BODY
    if fits(text_at(high)):
        return text_at(high)
    while low < high:  # the largest budget that fits
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(text_at(middle)) else (low, middle - 1)
    return cut(text_at(low), MAX_BODY)


def render_confirmation(request: InputRequestOut) -> str:
    """After a request closed: which one, its outcome and who answered ("Approve refund? Approved by alice.")."""
    return cut(f"{cut(request.prompt, 60)} {render_settled(request)}", MAX_BODY)


def render_progress_sms(request: InputRequestOut) -> str:
    """The count of an approval that takes several people, within Twilio's body limit."""
    return cut(render_progress(request), MAX_BODY)


def render_refusal(request: InputRequestOut, reason: str) -> str:
    return cut(f"Your answer to \"{cut(request.prompt, 60)}\" was not accepted: {reason}", MAX_BODY)


def render_message(text: str) -> str:
    """An assistant message, within Twilio's body limit."""
    return cut(text, MAX_BODY)
