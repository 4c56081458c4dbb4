"""Slack Web API calls (slack-sdk's WebClient) for delivery jobs: which token, and what a failure means.

A 429 or a Slack outage (a 5xx, or an error code Slack documents as transient) raises
engine.channels.contract.ChannelUnavailable
(a 429 with its `Retry-After`: the session's delivery waits that long; an outage
fails the job, which is retried); any other error answer raises SlackApiError with Slack's error code, a refusal
for good (engine.channels.contract.ChannelRefused).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Protocol

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError as SdkApiError
from slack_sdk.oauth.installation_store import Bot, InstallationStore

from engine.channels.contract import ChannelUnavailable

from .errors import SlackApiError
from .parse import Where

DEFAULT_RETRY_AFTER = 1.0
TIMEOUT_SECONDS = 10
TRANSIENT = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout",
                       "team_added_to_org", "ratelimited"})
"""Error codes Slack answers (with HTTP 200) when the call may succeed later: worth retrying."""


class BotTokens(Protocol):
    multi_workspace: bool

    def token(self, where: Where) -> str:
        """The bot token that may post at `where`."""
        ...


class BotToken:
    """One workspace, one token (SLACK_BOT_TOKEN)."""

    multi_workspace = False

    def __init__(self, token: str) -> None:
        self._token = token

    def token(self, where: Where) -> str:
        return self._token


class InstalledBots:
    """Many workspaces: each one's bot token from the OAuth installation store (an org-wide install serves
    every workspace of its Enterprise Grid org)."""

    multi_workspace = True

    def __init__(self, store: InstallationStore) -> None:
        self.store = store

    def bot(self, enterprise_id: str | None, team_id: str | None) -> Bot | None:
        """The workspace's own installation, else its org's org-wide one."""
        bot = self.store.find_bot(enterprise_id=enterprise_id, team_id=team_id)
        if bot is None and enterprise_id and team_id:
            bot = self.store.find_bot(enterprise_id=enterprise_id, team_id=None, is_enterprise_install=True)
        return bot if bot is not None and bot.bot_token else None

    def token(self, where: Where) -> str:
        bot = self.bot(where.enterprise_id, where.team_id or None)
        if bot is None or not bot.bot_token:
            raise SlackApiError("not_installed", f"the installation store (team {where.team_id})")
        return bot.bot_token


class SlackClient:
    """The calls delivery makes (and the DM a person place opens), each to the right workspace, and the members
    of a user group."""

    def __init__(self, tokens: BotTokens, base_url: str) -> None:
        self.tokens = tokens
        self.base_url = base_url if base_url.endswith("/") else base_url + "/"
        self._own_team: str | None = None

    def web(self, where: Where) -> WebClient:
        return WebClient(token=self.tokens.token(where), base_url=self.base_url, timeout=TIMEOUT_SECONDS)

    def post(self, where: Where, message: dict[str, Any]) -> str:
        """chat.postMessage in the place's thread; returns the message's `ts` (an opaque string)."""
        with translated("chat.postMessage"):
            response = self.web(where).chat_postMessage(
                channel=where.channel_id, thread_ts=where.thread_ts or None, **message)
        return str(response["ts"])

    def update(self, where: Where, channel_id: str, ts: str, message: dict[str, Any]) -> None:
        with translated("chat.update"):
            self.web(where).chat_update(channel=channel_id, ts=ts, **message)

    def open_direct(self, where: Where, user_id: str) -> str:
        """conversations.open with one user: the id of the bot's DM with them (the same one every time)."""
        with translated("conversations.open"):
            response = self.web(where).conversations_open(users=user_id)
        return str(response["channel"]["id"])

    def usergroup_members(self, team_id: str | None, usergroup: str) -> list[str]:
        """The user ids in a user group (usergroups.users.list), of the workspace `team_id` (None: the one
        SLACK_BOT_TOKEN serves). Raises ChannelUnavailable or SlackApiError, like every call here."""
        where = Where(team_id=team_id or "", channel_id="", thread_ts="")
        with translated("usergroups.users.list"):
            response = self.web(where).usergroups_users_list(usergroup=usergroup)
        return [str(user) for user in response.get("users") or []]

    def own_team(self) -> str:
        """The workspace SLACK_BOT_TOKEN serves (auth.test's `team_id`), asked once."""
        if self._own_team is None:
            with translated("auth.test"):
                response = self.web(Where(team_id="", channel_id="", thread_ts="")).auth_test()
            self._own_team = str(response["team_id"])
        return self._own_team

    def post_ephemeral(self, where: Where, user_id: str, text: str) -> None:
        with translated("chat.postEphemeral"):
            self.web(where).chat_postEphemeral(channel=where.channel_id, user=user_id, text=text,
                                               thread_ts=where.thread_ts or None)


@contextmanager
def translated(method: str) -> Iterator[None]:
    """slack-sdk's failures in this adapter's terms."""
    try:
        yield
    except SdkApiError as exc:
        status = exc.response.status_code
        if status == 429:
            retry_after = float(exc.response.headers.get("Retry-After", DEFAULT_RETRY_AFTER))
            raise ChannelUnavailable(f"Slack rate-limits {method}; retry after {retry_after:g}s",
                                     retry_after=retry_after) from exc
        if status >= 500:
            raise ChannelUnavailable(f"Slack answered {method} with HTTP {status}") from exc
        code = str(exc.response.get("error") or f"http_{status}")
        if code in TRANSIENT:
            raise ChannelUnavailable(f"Slack answered {method} with {code}") from exc
        raise SlackApiError(code, method) from exc
    except OSError as exc:
        raise ChannelUnavailable(f"Slack is unreachable for {method}: {exc}") from exc
