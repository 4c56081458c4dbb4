"""GitHub webhook deliveries: pydantic models of the payloads (extra fields ignored) and what a comment asks.

Only `issue_comment` with `action: created` can ask anything (on `edited` the sender may be an admin editing
someone else's words). Bots, our own user and our own App never ask anything, so the bot's prompts read back
are inert. Quoted lines (`> ...`) are someone else's words and are skipped. A reply is a comment whose first
line is `/approve [field=value ...] [note]`, `/deny [note]` or `/answer <number|label|text>`; a comment that
mentions the bot is a message to the session of its issue or pull request (`@bot /approve` is the command).
`/approve amount=20` approves an editable request with those fields changed, each typed by the request's schema.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError

from engine.answers.forms import Problem, edited, form_fields
from engine.answers.options import option_named, typed_response
from engine.protocol import InputRequestOut, InputResponse, Principal

from .errors import GithubParseError


class Payload(BaseModel):
    """GitHub adds fields without notice: read what we use, ignore the rest."""

    model_config = ConfigDict(extra="ignore")


class GithubUser(Payload):
    login: str
    id: int
    type: str = "User"


class GithubApp(Payload):
    slug: str | None = None


class GithubComment(Payload):
    id: int
    body: str | None = None
    user: GithubUser
    performed_via_github_app: GithubApp | None = None


class GithubIssue(Payload):
    number: int


class GithubRepository(Payload):
    full_name: str
    owner: GithubUser


class IssueCommentEvent(Payload):
    action: str
    comment: GithubComment
    issue: GithubIssue
    repository: GithubRepository


class PingEvent(Payload):
    zen: str | None = None
    hook_id: int | None = None


@dataclass(frozen=True)
class Delivery:
    """The headers GitHub sends with every delivery. A redelivery reuses the delivery id, which is shared by
    every hook the event went to: a delivery is (hook id, delivery id)."""

    event: str
    delivery_id: str
    hook_id: str

    @property
    def key(self) -> str:
        return f"delivery:{self.hook_id}:{self.delivery_id}"


DELIVERY_HEADERS = ("X-GitHub-Event", "X-GitHub-Delivery", "X-GitHub-Hook-ID")


def read_delivery(headers: Mapping[str, str]) -> Delivery:
    """From headers whose names are in lower case."""
    values = [(headers.get(name.lower()) or "").strip() for name in DELIVERY_HEADERS]
    missing = [name for name, value in zip(DELIVERY_HEADERS, values, strict=True) if not value]
    if missing:
        raise GithubParseError(f"the delivery has no {', '.join(missing)} header")
    if any(len(value) > 80 for value in values):
        raise GithubParseError("a delivery header is too long")
    return Delivery(*values)


ReplyKind = Literal["approve", "deny", "answer", "message"]


@dataclass(frozen=True)
class CommentReply:
    """A person's comment that asks something of us: a command for the shown prompt, or a message."""

    kind: ReplyKind
    text: str | None  # the denial note, the answer, the message
    comment_id: int
    user_id: int
    login: str
    repository: str  # "Owner/Repo", as GitHub spells it
    owner: str
    issue: int

    @property
    def ref(self) -> str:
        """The comment, for acknowledging it with reactions: `<owner>/<repo>:<comment id>`."""
        return f"{self.repository}:{self.comment_id}"


def parse_github_event(event: str, body: bytes, bot_login: str) -> PingEvent | CommentReply | None:
    """What a verified delivery asks of us; None when it is valid but not for us."""
    try:
        if event == "ping":
            return PingEvent.model_validate_json(body)
        if event != "issue_comment":
            return None
        payload = IssueCommentEvent.model_validate_json(body)
    except ValidationError as exc:
        raise GithubParseError(f"an {event} delivery we cannot read ({exc.error_count()} problem(s))") from exc
    comment = payload.comment
    if payload.action != "created" or written_by_us_or_a_bot(comment, bot_login):
        return None
    found = read_reply(comment.body or "", bot_login)
    if found is None:
        return None
    kind, text = found
    return CommentReply(kind, text, comment.id, comment.user.id, comment.user.login, payload.repository.full_name,
                        payload.repository.owner.login, payload.issue.number)


def written_by_us_or_a_bot(comment: GithubComment, bot_login: str) -> bool:
    handle = bot_login.removesuffix("[bot]").lower()
    app = comment.performed_via_github_app
    return (comment.user.type == "Bot" or comment.user.login.lower() in (bot_login.lower(), handle)
            or (app is not None and (app.slug or "").lower() == handle))


COMMAND = re.compile(r"^/(?P<command>approve|deny|answer)(?=\s|$)(?P<rest>.*)$", re.IGNORECASE | re.DOTALL)


def unquoted(body: str) -> str:
    return "\n".join(line for line in body.splitlines() if not line.lstrip().startswith(">")).strip()


def mention_of(bot_login: str) -> re.Pattern[str]:
    """`@bot` as a whole word (an App's `name[bot]` login is mentioned as `@name`)."""
    handle = re.escape(bot_login.removesuffix("[bot]"))
    return re.compile(rf"(?<![\w@/.-])@{handle}(?:\[bot\])?(?![\w-])", re.IGNORECASE)


def read_reply(body: str, bot_login: str) -> tuple[ReplyKind, str | None] | None:
    text = unquoted(body)
    mention = mention_of(bot_login)
    leading = mention.match(text)
    if leading:
        text = text[leading.end():].lstrip(" \t,:").strip()
    command = COMMAND.match(text)
    if command:
        name, rest = command.group("command").lower(), command.group("rest").strip()
        if name == "approve":
            return "approve", rest.splitlines()[0].strip() if rest else None
        if name == "deny":
            return "deny", rest or None
        return ("answer", rest) if rest else None
    if leading or mention.search(text):
        return ("message", text) if text else None
    return None


FIELD = re.compile(r"""(?P<name>[A-Za-z_][\w.-]*)=(?P<value>"(?:[^"\\]|\\.)*"|'[^']*'|[^\s"']\S*|)(?=\s|$)""")
"""One `name=value` of an `/approve`: the value bare, or quoted (`note="two words"`, `meta='{"a": 1}'`)."""


@dataclass(frozen=True)
class RefusedEdit:
    """An `/approve name=value ...` that cannot be applied to the prompt it replies to: nothing is approved."""

    request: InputRequestOut
    problems: list[Problem]


def approve_fields(text: str | None) -> tuple[dict[str, str], str]:
    """The leading `name=value` words of an `/approve` line, and what follows them (a note for people)."""
    fields, rest = {}, (text or "").strip()
    while (found := FIELD.match(rest)) is not None:
        fields[found.group("name")] = field_value(found.group("value"))
        rest = rest[found.end():].lstrip()
    return fields, rest


def field_value(value: str) -> str:
    """A value as written, its quotes taken off (a double-quoted one read as a JSON string: `\\"` is `"`)."""
    if len(value) >= 2 and value[0] == value[-1] == "'":
        return value[1:-1]
    if len(value) >= 2 and value[0] == value[-1] == '"':
        try:
            return str(json.loads(value))
        except ValueError:
            return value[1:-1]
    return value


def edit_response(request: InputRequestOut, fields: dict[str, str]) -> InputResponse | RefusedEdit:
    """An approve with the fields typed into the proposed input by the request's schema, or why it cannot be."""
    if not request.editable or request.action is None:
        return RefusedEdit(request, [{"field": "input", "problem": "this request cannot be edited; reply `/approve` "
                                                                   "to approve it as proposed"}])
    data, problems = edited(form_fields(request.action.input_schema), request.action.input, dict(fields))
    if problems:
        return RefusedEdit(request, problems)
    return InputResponse(request_id=request.request_id, option_id="approve", input=data)


def reply_response(reply: CommentReply, request: InputRequestOut) -> InputResponse | RefusedEdit | None:
    """What a command answers to the prompt it replies to (`/answer` follows DESIGN.md rule 6; `/approve` with
    fields, an edited approve or why not); None when it does not fit that request (`/approve` to a question,
    a number it does not have)."""
    ids = {option.id for option in request.options}
    if reply.kind == "approve" and "approve" in ids:
        fields, note = approve_fields(reply.text)
        named = set(request.action.input) | {f.name for f in form_fields(request.action.input_schema)} \
            if request.action is not None else set()
        stray = [name for name in re.findall(r"([A-Za-z_][\w.-]*)=", note) if name in named]
        if stray:  # `/approve but amount=20`: never approved as proposed when a change was asked for
            return RefusedEdit(request, [{"field": name, "problem": "write the fields to change right after /approve"}
                                         for name in stray])
        return edit_response(request, fields) if fields else InputResponse(request_id=request.request_id,
                                                                           option_id="approve")
    deny = option_named(ids, "deny")
    if reply.kind == "deny" and deny is not None:
        return InputResponse(request_id=request.request_id, option_id=deny, text=reply.text)
    if reply.kind == "answer" and reply.text:
        return typed_response(request, reply.text)
    return None


def github_principal(reply: CommentReply, permission: str | None) -> Principal:
    """Who wrote the comment: by numeric user id (logins change), the login kept for display; `permission` is
    the collaborator role GitHub's permission API gave (None when it could not be asked)."""
    return Principal(
        authenticator="github", issuer=f"github:{reply.owner}", principal_type="user",
        principal_id=f"github:{reply.user_id}",
        attributes={"login": reply.login, "repository": reply.repository, "permission": permission},
    )
