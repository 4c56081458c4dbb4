"""The Bolt app, for one workspace (a bot token) or many (OAuth: installations and OAuth states kept in the
gateway's database, and each request authorized from the stored bot)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.error import URLError

from slack_bolt import App, BoltContext
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.authorize import Authorize
from slack_bolt.error import BoltError
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.sqlalchemy_utils import normalize_datetime_for_db
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy.engine import Engine

from .client import InstalledBots
from .errors import SlackSetupError

SCOPES = ["app_mentions:read", "channels:history", "chat:write", "groups:history", "im:history", "im:write",
          "mpim:history", "usergroups:read"]
"""The bot scopes an OAuth install asks for: exactly those of adapters/slack/manifest.yml."""
STATE_SECONDS = 600


@dataclass(frozen=True)
class OAuthApp:
    """The Slack app's OAuth credentials, and the database its installations and OAuth states live in."""

    client_id: str
    client_secret: str
    database: Engine


def bolt_app(signing_secret: str, api_url: str, bot_token: str | None = None, oauth: OAuthApp | None = None) -> App:
    """One workspace (`bot_token`): auth.test runs once, here; a refused token or an unreachable Slack raises
    SlackSetupError. Several (`oauth`): installations from the store, and no auth.test per request."""
    client = WebClient(token=bot_token, base_url=api_url.rstrip("/") + "/")
    if oauth is None:
        sdk_log = logging.getLogger("slack_sdk.web.base_client")
        sdk_log.disabled = True  # (its line about the failure, at start only: the caller's says it)
        try:
            return App(signing_secret=signing_secret, client=client, process_before_response=True)
        except BoltError as exc:
            raise SlackSetupError(str(exc), unreachable=False) from exc
        except OSError as exc:  # URLError among them: refused, unresolvable, timed out
            reason = exc.reason if isinstance(exc, URLError) else exc
            raise SlackSetupError(str(reason), unreachable=True) from None
        finally:
            sdk_log.disabled = False
    installations = SQLAlchemyInstallationStore(client_id=oauth.client_id, engine=oauth.database)
    settings = OAuthSettings(
        client_id=oauth.client_id, client_secret=oauth.client_secret, scopes=SCOPES,
        installation_store=installations,
        state_store=ExpiringStateStore(expiration_seconds=STATE_SECONDS, engine=oauth.database),
    )
    authorize: Any = StoredBotAuthorize(InstalledBots(installations))  # an Authorize: Bolt's type hint omits it
    return App(signing_secret=signing_secret, client=client, process_before_response=True,
               installation_store=installations, oauth_settings=settings, authorize=authorize)


class ExpiringStateStore(SQLAlchemyOAuthStateStore):
    """slack-sdk's store deletes a state when an install uses it; one never used (an install page opened and left,
    or fetched by a link unfurler or a crawler) stayed forever. Issuing a state deletes the expired ones."""

    def issue(self, *args: Any, **kwargs: Any) -> str:
        expired = self.oauth_states.c.expire_at < normalize_datetime_for_db(datetime.now(tz=UTC))
        with self.engine.begin() as connection:
            connection.execute(self.oauth_states.delete().where(expired))
        return str(super().issue(*args, **kwargs))


class StoredBotAuthorize(Authorize):
    """Bolt's authorization from the installation store alone (Bolt's own calls auth.test on every request)."""

    def __init__(self, bots: InstalledBots) -> None:
        self.bots = bots

    def __call__(self, *, context: BoltContext, enterprise_id: str | None, team_id: str | None,
                 user_id: str | None, actor_enterprise_id: str | None = None, actor_team_id: str | None = None,
                 actor_user_id: str | None = None) -> AuthorizeResult | None:
        bot = self.bots.bot(enterprise_id, None if context.is_enterprise_install else team_id)
        if bot is None:
            return None
        return AuthorizeResult(enterprise_id=enterprise_id, team_id=team_id, bot_user_id=bot.bot_user_id,
                               bot_id=bot.bot_id, bot_token=bot.bot_token, user_id=user_id)


def installation_store(app: App) -> SQLAlchemyInstallationStore | None:
    """The OAuth installation store of a Bolt app made by `bolt_app` (None: one workspace)."""
    installations = app.installation_store
    return installations if isinstance(installations, SQLAlchemyInstallationStore) else None
