"""`POST /github/webhook`: the Flask shim over adapters.github, and the channel's factory for the composition root."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, abort, current_app, jsonify, request

from adapters.github import (
    GithubChannel,
    GithubClient,
    GithubParseError,
    GithubVerificationError,
    GithubWebhook,
)
from engine.jobs.runtime import Runtime

from .errors import error_response
from .settings import ConfigurationError, Settings, half_configured

log = logging.getLogger(__name__)

bp = Blueprint("github", __name__, url_prefix="/github")


@bp.post("/webhook")
def webhook() -> tuple[Response, int]:
    rt: Runtime = current_app.extensions["hitl"]
    channel = rt.channels.get(GithubChannel.name)
    if not isinstance(channel, GithubChannel):
        abort(404)
    delivery = GithubWebhook(headers={name.lower(): value for name, value in request.headers.items()},
                             body=request.get_data())
    try:
        reply = channel.receive(rt, delivery)
    except GithubVerificationError as exc:
        log.warning("refused a GitHub delivery: %s", exc)
        return error_response(401, "invalid_signature", str(exc))
    except GithubParseError as exc:
        log.warning("a signed GitHub delivery we cannot read: %s", exc)
        return error_response(400, "invalid_delivery", str(exc))
    return jsonify({"status": reply.outcome}), reply.status


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
