"""Slack on the gateway: the channel's factory, and its Bolt app (adapters/slack/inbound.py) mounted at `/slack/*`.

* One workspace: SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET. Many: SLACK_CLIENT_ID + SLACK_CLIENT_SECRET (OAuth,
  installations in the gateway's database, install at `/slack/install`) + SLACK_SIGNING_SECRET.
* Events and interactivity arrive at `/slack/events` (or `/slack/interactions`): a bad signature is a 401, a
  signed body Bolt cannot read a 400, both without effect.
* Socket Mode (SLACK_APP_TOKEN) runs the same listeners over a websocket: `hitl slack-socket`.
"""

from __future__ import annotations

from typing import Literal

from flask import Blueprint, Flask, Response, current_app
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from sqlalchemy import create_engine, pool

from adapters.slack import (
    Admission,
    BotToken,
    BotTokens,
    InstalledBots,
    Listeners,
    OAuthApp,
    SlackChannel,
    SlackClient,
    SlackParseError,
    SlackSetupError,
    SlackVerificationError,
    SlackWebhooks,
    bolt_app,
    installation_store,
)
from engine.channels.port import ChannelPort
from engine.jobs.runtime import Runtime
from engine.store.db import normalize_url

from .errors import ApiError
from .settings import ConfigurationError, Settings, half_configured
from .webhooks import webhook_request, webhook_response

bp = Blueprint("slack", __name__)


def slack_channel(settings: Settings) -> SlackChannel | None:
    """The Slack adapter when Slack is configured (web processes and workers alike), else None."""
    mode = slack_mode(settings)
    if mode is None:
        return None
    tokens: BotTokens
    if mode == "single":
        tokens = BotToken(str(settings.slack_bot_token))
    else:  # each worker process reads installations over its own connections (nothing pooled across a fork)
        engine = create_engine(normalize_url(settings.database_url), poolclass=pool.NullPool)
        tokens = InstalledBots(SQLAlchemyInstallationStore(client_id=str(settings.slack_client_id), engine=engine))
    return SlackChannel(SlackClient(tokens, settings.slack_api_url))


def slack_mode(settings: Settings) -> Literal["single", "oauth"] | None:
    """One workspace (SLACK_BOT_TOKEN), several (OAuth: SLACK_CLIENT_ID and SLACK_CLIENT_SECRET), or no Slack.
    Both need SLACK_SIGNING_SECRET; half a configuration raises, naming what is missing."""
    token, secret = settings.slack_bot_token, settings.slack_signing_secret
    oauth = {"SLACK_CLIENT_ID": settings.slack_client_id, "SLACK_CLIENT_SECRET": settings.slack_client_secret}
    if any(oauth.values()):
        if token:
            raise ConfigurationError("set SLACK_BOT_TOKEN (one workspace) or SLACK_CLIENT_ID and "
                                     "SLACK_CLIENT_SECRET (OAuth, several workspaces), not both")
        if not (all(oauth.values()) and secret):
            raise half_configured("Slack", {**oauth, "SLACK_SIGNING_SECRET": secret},
                                  also_given={"SLACK_APP_TOKEN": settings.slack_app_token})
        return "oauth"
    if token or secret or settings.slack_app_token:
        if not (token and secret):
            raise half_configured("Slack", {"SLACK_BOT_TOKEN": token, "SLACK_SIGNING_SECRET": secret},
                                  also_given={"SLACK_APP_TOKEN": settings.slack_app_token},
                                  hint="" if token else " (or, for several workspaces, SLACK_CLIENT_ID and "
                                  "SLACK_CLIENT_SECRET instead of SLACK_BOT_TOKEN)")
        return "single"
    return None


def init_app(app: Flask) -> None:
    """Mount Slack when the runtime has the Slack channel: the Bolt app, its listeners and `/slack/*`.
    A token Slack refuses, or a Slack out of reach, fails the start (one workspace: auth.test runs here)."""
    rt: Runtime = app.extensions["hitl"]
    channel = rt.channels.get("slack")
    if not isinstance(channel, SlackChannel):
        return
    s: Settings = app.config["HITL_SETTINGS"]
    oauth = OAuthApp(str(s.slack_client_id), str(s.slack_client_secret), rt.db.engine) if s.slack_client_id else None
    try:
        bolt = bolt_app(str(s.slack_signing_secret), s.slack_api_url, s.slack_bot_token, oauth)
    except SlackSetupError as exc:
        raise ConfigurationError(f"Slack cannot be reached at SLACK_API_URL ({s.slack_api_url}): {exc}"
                                 if exc.unreachable else f"Slack refused SLACK_BOT_TOKEN: {exc}") from None
    admission = Admission(s.slack_allowed_teams, s.slack_allow_external_users, installation_store(bolt))
    Listeners(ChannelPort(rt, channel.name), channel, admission).register(bolt)
    app.extensions["slack"] = SlackWebhooks(bolt, str(s.slack_signing_secret))
    app.register_blueprint(bp)


def mounted(app: Flask | None = None) -> SlackWebhooks:
    """The Bolt app `init_app` mounted on `app` (by default the current one)."""
    found: SlackWebhooks = (app or current_app).extensions["slack"]
    return found


@bp.post("/slack/events")
@bp.post("/slack/interactions")
def events() -> Response:
    try:
        return webhook_response(mounted().receive(webhook_request()))
    except SlackVerificationError as exc:
        raise ApiError(401, "invalid_signature", str(exc)) from exc
    except SlackParseError as exc:
        raise ApiError(400, "invalid_payload", str(exc)) from exc


@bp.get("/slack/install")
@bp.get("/slack/oauth_redirect")
def oauth() -> Response:
    """The OAuth install page and Slack's redirect back (404 with a single workspace)."""
    return webhook_response(mounted().oauth(webhook_request()))


def socket_mode_handler(app: Flask) -> SocketModeHandler:
    """The same Bolt app over Socket Mode (no public URL needed: local development)."""
    settings: Settings = app.config["HITL_SETTINGS"]
    if not settings.slack_app_token:
        raise ConfigurationError("Socket Mode needs SLACK_APP_TOKEN (an app-level xapp- token)")
    return SocketModeHandler(mounted(app).app, settings.slack_app_token)
