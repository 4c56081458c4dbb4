"""`SlackChannel`: the engine's ChannelAdapter for Slack. Every open request is shown, each as its own card;
`notify` tells a person turned away (another organization's) why, with an ephemeral message.

Built in web processes and workers alike (no Flask, no Bolt): delivery jobs call it; the Bolt listeners
(adapters/slack/inbound.py) use `address_of()` so a mention, a reply and an API-given place name a session the
same way.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from engine.channels.contract import ChannelUnavailable, QueuePosition, Reminder, SessionInfo
from engine.errors import GroupLookupFailed
from engine.protocol import InputRequestOut, Principal

from . import render
from .client import SlackClient
from .errors import SlackApiError
from .parse import Where

log = logging.getLogger(__name__)

SLACK_ID = r"^[A-Z0-9]+$"
TS = r"^[0-9]+\.[0-9]+$"


class ApiPlace(BaseModel):
    """The `address` of POST /api/sessions with `channel: "slack"`."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    channel: str = Field(pattern=SLACK_ID, max_length=32)
    thread_ts: str | None = Field(None, alias="threadTs", pattern=TS, max_length=32)
    team_id: str | None = Field(None, alias="teamId", pattern=SLACK_ID, max_length=32)
    enterprise_id: str | None = Field(None, alias="enterpriseId", pattern=SLACK_ID, max_length=32)


class SlackChannel:
    name = "slack"
    update_edits = True
    one_at_a_time = False
    opens_direct = True

    def __init__(self, client: SlackClient) -> None:
        self.client = client

    @property
    def multi_workspace(self) -> bool:
        return self.client.tokens.multi_workspace

    def address(self, data: dict[str, Any]) -> str:
        """`{channel, threadTs?}`, plus `teamId` (and `enterpriseId` in a Grid org) when serving many workspaces."""
        try:
            place = ApiPlace.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'address'}: {e['msg']}" for e in exc.errors())
            raise ValueError(f"a Slack address is {{channel, threadTs?, teamId?}}: {problems}") from exc
        if self.multi_workspace and not place.team_id:
            raise ValueError("this gateway serves several Slack workspaces: give the address's teamId")
        return self.address_of(Where(team_id=place.team_id or "", channel_id=place.channel,
                                     thread_ts=place.thread_ts or "", enterprise_id=place.enterprise_id))

    def address_of(self, where: Where) -> str:
        """A session's address; with one workspace (one token) the team is left out, so every way in agrees."""
        return (where if self.multi_workspace else replace(where, team_id="", enterprise_id=None)).address

    def reaches(self, principal_id: str) -> bool:
        """Whether `principal_id` is a Slack user's, `slack:<team>:<user>`."""
        return direct_user(principal_id) is not None

    def direct(self, principal_id: str) -> str:
        """The address of the bot's DM with the Slack user `slack:<team>:<user>`, opened with conversations.open
        (a message they write there reaches the same session)."""
        user = direct_user(principal_id)
        if user is None:
            raise ValueError(f"{principal_id} is not a Slack user's principal id")
        team_id, user_id = user
        channel_id = self.client.open_direct(Where(team_id=team_id, channel_id=""), user_id)
        return self.address_of(Where(team_id=team_id, channel_id=channel_id))

    def show(self, session: SessionInfo, request: InputRequestOut, position: QueuePosition) -> str:
        """Post the request's card in the session's thread; its ref is `<channel>|<ts>` for chat.update."""
        where = Where.from_address(session.address)
        ts = self.client.post(where, render.request_card(request))
        return f"{where.channel_id}|{ts}"

    def update(self, session: SessionInfo, request: InputRequestOut, ref: str | None) -> None:
        """Replace the card with its settled form (no controls, who answered). Sibling cards are untouched."""
        self.update_card(session, request, ref, render.settled_card(request))

    def refresh(self, session: SessionInfo, request: InputRequestOut, ref: str) -> None:
        """Post the open request's card anew in place (it says when the request escalated)."""
        self.update_card(session, request, ref, render.request_card(request))

    def progress(self, session: SessionInfo, request: InputRequestOut, ref: str,
                 elsewhere: Principal | None = None) -> None:
        """Post the open request's card anew in place, saying how many approved of how many, and who (at every
        place that shows it, wherever the approver answered)."""
        self.update_card(session, request, ref, render.request_card(request))

    def update_card(self, session: SessionInfo, request: InputRequestOut, ref: str | None,
                    card: dict[str, Any]) -> None:
        channel_id, _, ts = (ref or "").partition("|")
        if not ts:
            return
        try:
            self.client.update(Where.from_address(session.address), channel_id, ts, card)
        except SlackApiError as exc:  # the card was deleted, say: the conversation goes on without it
            log.warning("could not update the card of %s: %s", request.request_id, exc)

    def remind(self, session: SessionInfo, request: InputRequestOut, ref: str, reminder: Reminder) -> str:
        """A reply in the card's thread (the session's thread, or one under the card) mentioning the people the
        request waits for."""
        channel_id, _, card_ts = ref.partition("|")
        where = Where.from_address(session.address)
        ts = self.client.post(replace(where, thread_ts=where.thread_ts or card_ts), render.reminder(request, reminder))
        return f"{channel_id}|{ts}"

    def say(self, session: SessionInfo, text: str) -> str:
        where = Where.from_address(session.address)
        return f"{where.channel_id}|{self.client.post(where, render.message(text))}"

    def refuse(self, session: SessionInfo, request: InputRequestOut, responder: Principal, reason: str) -> None:
        """An ephemeral message to the refused Slack user, in the channel they answered in (a request shown in
        several places hears the refusal at each; someone refused elsewhere was told there)."""
        user_id = responder.attributes.get("userId")
        where = Where.from_address(session.address)
        answered_in = responder.attributes.get("channelId")
        if responder.authenticator != "slack" or not user_id or (answered_in and answered_in != where.channel_id):
            return
        try:
            self.client.post_ephemeral(where, str(user_id), render.refusal(request, reason))
        except SlackApiError as exc:  # they left the channel, say: nothing else depends on it
            log.warning("could not tell %s why they were refused: %s", responder.principal_id, exc)

    def group_members(self, kind: str, ref: str) -> frozenset[str]:
        """The principal ids (`slack:<team>:<user>`) of a user group's members; `ref` is its id, or
        `<team id>:<its id>` (needed when serving several workspaces). GroupLookupFailed when Slack cannot say."""
        team, _, usergroup = ref.rpartition(":")
        if kind != "slack-usergroup" or not usergroup:
            raise GroupLookupFailed(f"Slack has no group {kind}:{ref}")
        if not team and self.multi_workspace:
            raise GroupLookupFailed("this gateway serves several Slack workspaces: name the user group's as "
                                    f"slack-usergroup:<team id>:{usergroup}")
        try:
            team = team or self.client.own_team()
            users = self.client.usergroup_members(team, usergroup)
        except (SlackApiError, ChannelUnavailable) as exc:
            raise GroupLookupFailed(f"Slack answered: {exc}") from exc
        return frozenset(f"slack:{team}:{user}" for user in users)

    def notify(self, notice: Mapping[str, Any]) -> None:
        """Post a turned-away person's notice (see `turned_away_notice`) as an ephemeral message to them, where
        they wrote or clicked; raises like any post (the engine logs it, and a later item tries again)."""
        self.client.post_ephemeral(Where.from_address(notice["address"]), notice["user"], notice["text"])


def direct_user(principal_id: str) -> tuple[str, str] | None:
    """(team, user) of a Slack user's principal id, `slack:<team>:<user>`; None for any other."""
    authenticator, _, rest = principal_id.partition(":")
    team_id, _, user_id = rest.rpartition(":")
    if authenticator != "slack" or not re.match(SLACK_ID, user_id) or not team_id:
        return None
    return team_id, user_id


def turned_away_notice(address: str, user_id: str) -> dict[str, Any]:
    """The notice for `notify`: what to tell the user `user_id` at `address` (a channel, or a thread in it)."""
    return {"address": address, "user": user_id, "text": render.TURNED_AWAY}
