"""The GitHub adapter's errors; the gateway turns them into HTTP at the edge (401, 400), jobs let them raise."""

from __future__ import annotations

from engine.channels.contract import ChannelRefused


class GithubError(Exception):
    """Anything the GitHub adapter refuses or fails at."""


class GithubVerificationError(GithubError):
    """A delivery whose `X-Hub-Signature-256` is missing or wrong: it is not from GitHub (401, no effect)."""


class GithubParseError(GithubError):
    """A signed delivery we cannot read: not JSON, missing headers or fields (400)."""


class GithubApiError(GithubError, ChannelRefused):
    """GitHub's REST API refused a call for good (a 4xx other than a rate limit: the issue was deleted or locked,
    the token lost access): retrying will not help, so delivery does not retry it."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"GitHub API answered {status}: {message}")
        self.status = status
