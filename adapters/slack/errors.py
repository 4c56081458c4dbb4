"""The Slack adapter's errors; the gateway maps them to HTTP at its edge (verification 401, parse 400)."""

from __future__ import annotations

from engine.channels.contract import ChannelRefused


class SlackError(Exception):
    """Anything the Slack adapter refuses or fails at."""


class SlackVerificationError(SlackError):
    """A request that Slack did not sign with our signing secret, or signed too long ago (a replay)."""


class SlackParseError(SlackError):
    """A signed payload without the fields this gateway needs."""


class SlackApiError(SlackError, ChannelRefused):
    """A Web API call Slack refused for good (`code` is Slack's `error`: `not_in_channel`, `channel_not_found`,
    `is_archived`, `token_revoked`, `missing_scope`...): calling again cannot help, so delivery does not retry it."""

    def __init__(self, code: str, method: str) -> None:
        super().__init__(f"Slack answered {method} with {code}")
        self.code = code
        self.method = method


class SlackSetupError(SlackError):
    """The Bolt app cannot start: Slack refused the bot token (`unreachable` False) or cannot be reached (True)."""

    def __init__(self, message: str, *, unreachable: bool) -> None:
        super().__init__(message)
        self.unreachable = unreachable
