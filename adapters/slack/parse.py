"""Slack payloads in, engine terms out: who said what, where (events: app_mention and message), and the footing
adapters/slack/interactions.py reads clicks and modals on (the ids, places, principals and payload models).

Only the fields this gateway reads are modelled (pydantic, extras ignored: Slack adds fields without notice);
ids are `Id`s (printable ASCII), so a signed payload with a strange one is a parse error, never a strange query.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from engine.answers.forms import FormField
from engine.protocol import Principal

from .body import Id
from .errors import SlackParseError

ACTION_PREFIX = "hitl|"
ANSWER_VIEW = "hitl|answer"
"""The `callback_id` of the "Type an answer" modal."""
ANSWER_BLOCK, ANSWER_INPUT = "answer", "text"
EDIT_VIEW = "hitl|edit"
"""The `callback_id` of an editable approval's "Edit" modal."""
EDIT_FIELD, EDIT_INPUT, WHOLE_INPUT = "field|", "value", "input"
"""The edit modal's input blocks: `field|<property>` (or `input`, the whole input as JSON), each element `value`."""
WHOLE = FormField(WHOLE_INPUT, "Input (JSON)", "json", True)
"""The one field of an input whose schema names no properties."""
HANDLED_SUBTYPES = {None, "thread_broadcast", "file_share"}
"""Message subtypes that are a person writing (also sent to the channel, or with a file attached); edits, joins,
bot posts and the like are ignored."""
DIRECT = "im"


@dataclass(frozen=True)
class Where:
    """A place in Slack: workspace (team, and its Enterprise Grid org), channel, thread (`""`: none).

    Its address is `slack:<team>:<channel>:<thread>`, the team written `<enterprise>/<team>` in a Grid org;
    a single-workspace gateway leaves the team out (`slack::<channel>:<thread>`), since it has one token.
    """

    team_id: str
    channel_id: str
    thread_ts: str = ""
    enterprise_id: str | None = None

    @property
    def address(self) -> str:
        workspace = f"{self.enterprise_id}/{self.team_id}" if self.enterprise_id else self.team_id
        return f"slack:{workspace}:{self.channel_id}:{self.thread_ts}"

    @classmethod
    def from_address(cls, address: str) -> Where:
        parts = address.split(":")
        if len(parts) != 4 or parts[0] != "slack" or not parts[2]:
            raise ValueError(f"not a Slack address: {address!r}")
        enterprise, _, team = parts[1].rpartition("/")
        return cls(team_id=team, channel_id=parts[2], thread_ts=parts[3], enterprise_id=enterprise or None)


def slack_principal(user_id: str, team_id: str, channel_id: str | None, enterprise_id: str | None = None,
                    user_name: str | None = None) -> Principal:
    """`slack:<team>:<user>`; the team is the user's own (`user.team_id`), never the payload's `team`."""
    attributes: dict[str, Any] = {"userId": user_id, "teamId": team_id, "channelId": channel_id}
    if enterprise_id:
        attributes["enterpriseId"] = enterprise_id
    if user_name:
        attributes["userName"] = user_name
    return Principal(authenticator="slack", issuer=f"slack:{team_id}", principal_type="user",
                     principal_id=f"slack:{team_id}:{user_id}", attributes=attributes)


# -- events: app_mention and message ---------------------------------------------------------------------


class Payload(BaseModel):
    model_config = ConfigDict(extra="ignore")


class MessageEvent(Payload):
    type: Literal["app_mention", "message"]
    channel: Id
    ts: Id
    user: Id | None = None
    text: str = ""
    thread_ts: Id | None = None
    channel_type: Id | None = None
    subtype: Id | None = None
    bot_id: Id | None = None
    team: Id | None = None
    user_team: Id | None = None


class Authorization(Payload):
    team_id: Id | None = None
    enterprise_id: Id | None = None


class EventCallback(Payload):
    type: Literal["event_callback"]
    event_id: Id
    event: MessageEvent
    team_id: Id | None = None
    enterprise_id: Id | None = None
    authorizations: list[Authorization] = []
    is_ext_shared_channel: bool = False

    def workspace(self) -> tuple[str | None, str | None]:
        """The installation the event came to, (team, enterprise): `authorizations[0]`'s (in a Slack Connect
        channel the top-level ids are the workspace that created the channel); an org-wide install's
        authorization names no team, the top-level one is where the event happened."""
        if not self.authorizations:
            return self.team_id, self.enterprise_id
        installed = self.authorizations[0]
        return installed.team_id or self.team_id, installed.enterprise_id

    def writers_enterprise(self, team: str) -> str | None:
        """The Enterprise Grid organization of the event's writer, whose team is `team` (Bolt's
        `extract_actor_enterprise_id`): the team itself when Slack names it by its organization (`E...`); in a
        Slack Connect channel the top-level one when the writer's team is the top-level team, else unknown; in
        a channel not shared outside, the installation's (everyone in it is of that organization)."""
        if team.startswith("E"):
            return team
        if self.is_ext_shared_channel:
            return self.enterprise_id if team == self.team_id else None
        return self.workspace()[1]


@dataclass(frozen=True)
class Said:
    """A person's message to the gateway: a mention, a reply in a session's thread, or a direct message."""

    event_id: str
    principal: Principal
    where: Where
    text: str
    direct: bool


def parse_mention(body: dict[str, Any], bot_user_id: str | None) -> Said | None:
    """An `app_mention`: the session is the thread the mention is in (or starts). None: nothing but the mention,
    or a mention that is not a person writing (another app or a workflow posted it: it carries a `bot_id`)."""
    callback = model(EventCallback, body)
    event = callback.event
    if not by_a_person(event):
        return None
    thread = event.thread_ts or event.ts
    return said(callback, bot_user_id, thread, direct=False)


def parse_message(body: dict[str, Any], bot_user_id: str | None) -> Said | None:
    """A `message` that is a person writing in a thread or a DM. None for everything else: bots, edits and
    joins, top-level channel chatter, and a channel message that mentions the bot (its `app_mention` copy
    is the one taken)."""
    callback = model(EventCallback, body)
    event = callback.event
    if not by_a_person(event):
        return None
    direct = event.channel_type == DIRECT
    if not direct and (event.thread_ts is None or mentions(event.text, bot_user_id)):
        return None
    return said(callback, bot_user_id, "" if direct else event.thread_ts or "", direct=direct)


def by_a_person(event: MessageEvent) -> bool:
    """Not a bot's post (another app's, a workflow's, our own), an edit, a join or the like."""
    return event.bot_id is None and event.subtype in HANDLED_SUBTYPES


def said(callback: EventCallback, bot_user_id: str | None, thread: str, direct: bool) -> Said | None:
    event = callback.event
    if not event.user:
        return None
    text = plain_text(event.text, bot_user_id)
    team = event.user_team or event.team or callback.team_id
    workspace, enterprise = callback.workspace()
    workspace = workspace or team
    if not text or not team or not workspace:
        return None
    principal = slack_principal(event.user, team, event.channel, callback.writers_enterprise(team))
    where = Where(team_id=workspace, channel_id=event.channel, thread_ts=thread, enterprise_id=enterprise)
    return Said(callback.event_id, principal, where, text, direct)


def mentions(text: str, bot_user_id: str | None) -> bool:
    return bool(bot_user_id) and f"<@{bot_user_id}>" in text


def plain_text(text: str, bot_user_id: str | None) -> str:
    """The message as the person meant it: the bot's mention removed, Slack's `&amp; &lt; &gt;` undone."""
    if bot_user_id:
        text = re.sub(rf"<@{re.escape(bot_user_id)}(\|[^>]*)?>", "", text)
    return html.unescape(text).strip()


M = TypeVar("M", bound=BaseModel)


def model(cls: type[M], body: dict[str, Any]) -> M:
    try:
        return cls.model_validate(body)
    except ValidationError as exc:
        raise SlackParseError(f"not a {cls.__name__} payload: {exc.error_count()} problem(s)") from exc
