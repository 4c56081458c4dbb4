"""`POST /github/webhook`: the Flask shim over adapters.github, and the channel's factory for the composition root."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, abort, current_app

from adapters.github import GithubChannel, GithubClient, GithubParseError, GithubVerificationError
from engine.channels.port import ChannelPort
from engine.jobs.runtime import Runtime

from .errors import error_response
from .settings import ConfigurationError, Settings, half_configured
from .webhooks import webhook_request, webhook_response

log = logging.getLogger(__name__)

bp = Blueprint("github", __name__, url_prefix="/github")


@bp.post("/webhook")
def webhook() -> Response | tuple[Response, int]:
    rt: Runtime = current_app.extensions["hitl"]
    channel = rt.channels.get(GithubChannel.name)
    if not isinstance(channel, GithubChannel):
        abort(404)
    try:
        reply = channel.receive(ChannelPort(rt, channel.name), webhook_request())
    except GithubVerificationError as exc:
        log.warning("refused a GitHub delivery: %s", exc)
        return error_response(401, "invalid_signature", str(exc))
    except GithubParseError as exc:
        log.warning("a signed GitHub delivery we cannot read: %s", exc)
        return error_response(400, "invalid_delivery", str(exc))
    return webhook_response(reply)


def github_channel(settings: Settings) -> GithubChannel | None:
    """The GitHub channel when any GITHUB_* credential is set; fails at start-up naming what else is missing."""
    secret, token, login = settings.github_webhook_secret, settings.github_token, settings.github_bot_login
    if not (secret or token or login):
        return None
    if not (secret and token and login):
        raise half_configured("GitHub", {"GITHUB_WEBHOOK_SECRET": secret, "GITHUB_TOKEN": token,
                                         "GITHUB_BOT_LOGIN": login})
    if not settings.github_api_url.startswith(("https://", "http://")):
        raise ConfigurationError(f"GITHUB_API_URL is GitHub's REST API URL (https://...), not "
                                 f"{settings.github_api_url!r}")
    return GithubChannel(GithubClient(token, settings.github_api_url), login.removeprefix("@"), secret,
                         settings.github_min_permission)
