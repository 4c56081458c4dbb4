"""Slack on the gateway: the channel factory, the Bolt app and its listeners, mounted at `/slack/*`.

* One workspace: SLACK_BOT_TOKEN + SLACK_SIGNING_SECRET. Many: SLACK_CLIENT_ID + SLACK_CLIENT_SECRET (OAuth,
  installations in the gateway's database, install at `/slack/install`) + SLACK_SIGNING_SECRET.
* Events and interactivity arrive at `/slack/events` (or `/slack/interactions`): the edge checks the signature
  (401, no effect), then Bolt's listeners store an inbound item with `engine.channels.inbound.accept` and ack.
  No Web API call in the request path, except `views.open` for the "Type an answer" and "Edit" modals (a trigger lives 3
  seconds). A submitted edit is checked against the tool before it is stored: what does not fit is shown in the
  modal (`response_action: errors`).
* Only people of the allowed teams are heard (gateway/slack_admission.py): anyone else's message, click or
  modal is stored as ignored, and they are told once per channel (an ephemeral message, posted by the job).
* Socket Mode (SLACK_APP_TOKEN) runs the same listeners over a websocket: `hitl slack-socket`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Literal
from urllib.error import URLError

from flask import Blueprint, Flask, Response, current_app, request
from slack_bolt import Ack, App, BoltContext, BoltRequest, BoltResponse
from slack_bolt.adapter.flask import SlackRequestHandler
from slack_bolt.adapter.socket_mode import SocketModeHandler
from slack_bolt.authorization import AuthorizeResult
from slack_bolt.authorization.authorize import Authorize
from slack_bolt.error import BoltError
from slack_bolt.oauth.oauth_settings import OAuthSettings
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError
from slack_sdk.oauth.installation_store.sqlalchemy import SQLAlchemyInstallationStore
from slack_sdk.oauth.sqlalchemy_utils import normalize_datetime_for_db
from slack_sdk.oauth.state_store.sqlalchemy import SQLAlchemyOAuthStateStore
from sqlalchemy import create_engine, pool, select

from adapters.slack import (
    ANSWER_VIEW,
    EDIT_VIEW,
    BotToken,
    BotTokens,
    Click,
    InstalledBots,
    Said,
    SlackChannel,
    SlackClient,
    SlackParseError,
    SlackVerificationError,
    Where,
    answer_modal,
    edit_modal,
    edited_input,
    modal_errors,
    parse_block_actions,
    parse_edit_submission,
    parse_mention,
    parse_message,
    parse_view_submission,
    read_body,
    turned_away_notice,
    verify_slack_signature,
)
from engine.answers.input_requests import request_out
from engine.answers.submit import edit_problems
from engine.channels.inbound import accept, choice_item, ignored_item, message_item, responses_item
from engine.jobs.runtime import Runtime
from engine.protocol import InputRequestOut, InputResponse, Principal
from engine.store.db import normalize_url
from engine.store.statuses import RequestStatus
from engine.store.tables import InputRequest, Session

from .errors import ApiError
from .settings import ConfigurationError, Settings, half_configured
from .slack_admission import TURNED_AWAY, Admission

log = logging.getLogger(__name__)

bp = Blueprint("slack", __name__)

SCOPES = ["app_mentions:read", "channels:history", "chat:write", "groups:history", "im:history", "mpim:history"]
"""The bot scopes an OAuth install asks for: exactly those of adapters/slack/manifest.yml."""
STATE_SECONDS = 600


# -- configuration ---------------------------------------------------------------------------------------


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


# -- the Bolt app ----------------------------------------------------------------------------------------


def init_app(app: Flask) -> None:
    """Mount Slack when the runtime has the Slack channel: the Bolt app, its listeners and `/slack/*`."""
    rt: Runtime = app.extensions["hitl"]
    channel = rt.channels.get("slack")
    if not isinstance(channel, SlackChannel):
        return
    settings: Settings = app.config["HITL_SETTINGS"]
    bolt = bolt_app(settings, rt)
    installations = bolt.installation_store
    stored = installations if isinstance(installations, SQLAlchemyInstallationStore) else None
    Listeners(rt, channel, Admission(settings, stored)).register(bolt)
    app.extensions["slack"] = SlackRequestHandler(bolt)
    app.register_blueprint(bp)


class ExpiringStateStore(SQLAlchemyOAuthStateStore):
    """slack-sdk's store deletes a state when an install uses it; one never used (an install page opened and left,
    or fetched by a link unfurler or a crawler) stayed forever. Issuing a state deletes the expired ones."""

    def issue(self, *args: Any, **kwargs: Any) -> str:
        expired = self.oauth_states.c.expire_at < normalize_datetime_for_db(datetime.now(tz=UTC))
        with self.engine.begin() as connection:
            connection.execute(self.oauth_states.delete().where(expired))
        return str(super().issue(*args, **kwargs))


def bolt_app(settings: Settings, rt: Runtime) -> App:
    """Single workspace: auth.test runs once, here (a bad token fails the start). OAuth: installations and
    OAuth states in the gateway's database, and authorization from the stored bot (no auth.test per request)."""
    client = WebClient(token=settings.slack_bot_token, base_url=settings.slack_api_url.rstrip("/") + "/")
    if settings.slack_bot_token:
        sdk_log = logging.getLogger("slack_sdk.web.base_client")
        sdk_log.disabled = True  # (its line about the failure, at start only: ours says it, naming the setting)
        try:
            return App(signing_secret=settings.slack_signing_secret, client=client, process_before_response=True)
        except BoltError as exc:
            raise ConfigurationError(f"Slack refused SLACK_BOT_TOKEN: {exc}") from exc
        except OSError as exc:  # URLError among them: refused, unresolvable, timed out
            reason = exc.reason if isinstance(exc, URLError) else exc
            raise ConfigurationError(f"Slack cannot be reached at SLACK_API_URL ({settings.slack_api_url}): "
                                     f"{reason}") from None
        finally:
            sdk_log.disabled = False
    installations = SQLAlchemyInstallationStore(client_id=str(settings.slack_client_id), engine=rt.db.engine)
    oauth = OAuthSettings(
        client_id=settings.slack_client_id, client_secret=settings.slack_client_secret, scopes=SCOPES,
        installation_store=installations,
        state_store=ExpiringStateStore(expiration_seconds=STATE_SECONDS, engine=rt.db.engine),
    )
    authorize: Any = StoredBotAuthorize(InstalledBots(installations))  # an Authorize: Bolt's type hint omits it
    return App(signing_secret=settings.slack_signing_secret, client=client, process_before_response=True,
               installation_store=installations, oauth_settings=oauth, authorize=authorize)


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


# -- listeners -------------------------------------------------------------------------------------------


class Listeners:
    """Each listener turns a verified payload into an inbound item (`engine.channels.inbound.accept`: deduplicated,
    stored, a job enqueued) and acks; the job does the rest. A person the admission turns away gets an ignored
    item instead, whose notice tells them why, once per channel."""

    def __init__(self, rt: Runtime, channel: SlackChannel, admission: Admission) -> None:
        self.rt, self.channel, self.admission = rt, channel, admission

    def register(self, bolt: App) -> None:
        bolt.event("app_mention")(self.mention)
        bolt.event("message")(self.message)
        bolt.action(re.compile(r"^hitl\|"))(self.click)
        bolt.view_submission(ANSWER_VIEW)(self.typed)
        bolt.view_submission(EDIT_VIEW)(self.edited)
        if self.channel.multi_workspace:
            bolt.enable_token_revocation_listeners()
        else:  # subscribed in the manifest for OAuth installs; one workspace has nothing to forget
            bolt.event("app_uninstalled")(ignore)
            bolt.event("tokens_revoked")(ignore)
        bolt.error(failed)

    def mention(self, body: dict[str, Any], context: BoltContext, request: BoltRequest) -> None:
        said = parse_mention(body, context.bot_user_id)
        if said is not None:
            self.take(said, self.channel.address_of(said.where), context, request)

    def message(self, body: dict[str, Any], context: BoltContext, request: BoltRequest) -> None:
        """A DM, or a reply in the thread of an existing session (other threads are not ours)."""
        said = parse_message(body, context.bot_user_id)
        if said is None:
            return
        address = self.channel.address_of(said.where)
        if said.direct or has_session(self.rt, address):
            self.take(said, address, context, request)

    def take(self, said: Said, address: str, context: BoltContext, request: BoltRequest) -> None:
        admitted = self.admission.admits(said.principal, context)
        item = message_item(address, said.text) if admitted else self.turned_away(said.principal, said.where)
        self.store(said.event_id, said.principal, request, item)

    def click(self, ack: Ack, body: dict[str, Any], context: BoltContext, request: BoltRequest,
              client: WebClient) -> None:
        click = parse_block_actions(body)
        if not self.admission.admits(click.principal, context):
            where = interaction_place(context, click.channel_id, click.thread_ts)
            self.store(click.external_id, click.principal, request, self.turned_away(click.principal, where))
        elif click.position is None:  # "type an answer" or "edit": a modal shows the request
            shown = find_request(self.rt, click.request_id)
            if shown is not None and click.control == "edit":
                if shown.editable and shown.status == RequestStatus.PENDING:
                    open_modal(client, click, edit_modal(shown, click.channel_id))
            elif shown is not None:
                open_modal(client, click, answer_modal(shown, click.channel_id))
        else:  # the job that applies it looks the option up (a click on a card we do not know: audit only)
            self.store(click.external_id, click.principal, request, choice_item(click.request_id, click.position))
        ack()

    def typed(self, ack: Ack, body: dict[str, Any], context: BoltContext, request: BoltRequest) -> None:
        typed = parse_view_submission(body)
        if self.admission.admits(typed.principal, context):
            item = responses_item([InputResponse(request_id=typed.request_id, text=typed.text)])
        else:
            item = self.turned_away_from_modal(typed.principal, context)
        self.store(typed.external_id, typed.principal, request, item)
        ack()

    def edited(self, ack: Ack, body: dict[str, Any], context: BoltContext, request: BoltRequest) -> None:
        """An edit is approved once it fits the tool; until then the modal stays open, saying what does not.
        A person of no allowed team is turned away as anywhere else (their edit is neither checked nor kept)."""
        submission = parse_edit_submission(body)
        if not self.admission.admits(submission.principal, context):
            self.store(submission.external_id, submission.principal, request,
                       self.turned_away_from_modal(submission.principal, context))
            ack()
            return
        shown = find_request(self.rt, submission.request_id)
        if shown is None:
            raise SlackParseError(f"an edit of no known request ({submission.request_id})")
        data, problems = edited_input(submission, shown)
        problems = problems or edit_problems(self.rt, shown.request_id, data)
        if problems:
            ack(response_action="errors", errors=modal_errors(shown, problems))
            return
        response = InputResponse(request_id=shown.request_id, option_id="approve", input=data)
        self.store(submission.external_id, submission.principal, request, responses_item([response]))
        ack()

    def turned_away(self, principal: Principal, where: Where | None) -> dict[str, Any]:
        """The ignored item of a person of no allowed team; its notice tells them why where they wrote or
        clicked (`where`; None: nowhere to tell them), the first time per person and channel."""
        if where is None:
            return ignored_item(TURNED_AWAY)
        channel = self.channel.address_of(replace(where, thread_ts=""))
        notice = turned_away_notice(self.channel.address_of(where), str(principal.attributes["userId"]))
        return ignored_item(TURNED_AWAY, notice=notice, once=f"{TURNED_AWAY}:{channel}:{principal.principal_id}")

    def turned_away_from_modal(self, principal: Principal, context: BoltContext) -> dict[str, Any]:
        """`turned_away` for a modal's submission, told in the channel its card was in."""
        return self.turned_away(principal, interaction_place(context, principal.attributes.get("channelId"), ""))

    def store(self, external_id: str, principal: Principal, request: BoltRequest,
              item: dict[str, Any] | None) -> None:
        """Once per platform id: a retry or a replay is counted (for the metrics) and changes nothing."""
        accept(self.rt, "slack", external_id, principal, request.raw_body.encode(), item)


def ignore() -> None:
    """An event the app is subscribed to and has nothing to do with (Bolt would answer 404, and Slack retry)."""


def failed(error: Exception) -> BoltResponse:
    """A payload without what the gateway needs is a 400; anything else a logged 500 with nothing sent out."""
    if isinstance(error, SlackParseError):
        log.warning("unusable Slack payload: %s", error)
        return BoltResponse(status=400, body="")
    log.error("a Slack listener failed", exc_info=error)
    return BoltResponse(status=500, body="")


def interaction_place(context: BoltContext, channel_id: str | None, thread_ts: str) -> Where | None:
    """Where a click or a modal came from, in the workspace Bolt authorized it for (None: no channel known)."""
    if not channel_id:
        return None
    return Where(team_id=context.team_id or "", channel_id=channel_id, thread_ts=thread_ts,
                 enterprise_id=context.enterprise_id)


def find_request(rt: Runtime, request_id: str) -> InputRequestOut | None:
    with rt.db.read() as db:
        row = db.get(InputRequest, request_id)
        return request_out(row) if row is not None else None


def has_session(rt: Runtime, address: str) -> bool:
    with rt.db.read() as db:
        return db.execute(select(Session.id).where(
            Session.channel == "slack", Session.address == address).limit(1)).first() is not None


def open_modal(client: WebClient, click: Click, view: dict[str, Any]) -> None:
    try:
        client.views_open(trigger_id=click.trigger_id, view=view)
    except SlackClientError as exc:  # the person can still reply in the thread, or approve as proposed
        log.warning("could not open the %s modal of %s: %s", click.control, click.request_id, exc)


# -- HTTP ------------------------------------------------------------------------------------------------


def handler() -> SlackRequestHandler:
    found: SlackRequestHandler = current_app.extensions["slack"]
    return found


@bp.post("/slack/events")
@bp.post("/slack/interactions")
def events() -> Response:
    """Events API and interactivity. The signature is checked on the raw body before anything reads it, then
    the body is read as Bolt will read it (Bolt reads it before any listener, or its error handler, runs): a
    signed body Bolt could not read is a 400 here."""
    settings: Settings = current_app.config["HITL_SETTINGS"]
    try:
        verify_slack_signature(str(settings.slack_signing_secret), request.headers.get("X-Slack-Request-Timestamp"),
                               request.headers.get("X-Slack-Signature"), request.get_data())
    except SlackVerificationError as exc:
        raise ApiError(401, "invalid_signature", str(exc)) from exc
    try:
        read_body(request.get_data(), request.headers.get("Content-Type"))
    except SlackParseError as exc:
        raise ApiError(400, "invalid_payload", str(exc)) from exc
    return handler().handle(request)


@bp.get("/slack/install")
@bp.get("/slack/oauth_redirect")
def oauth() -> Response:
    """The OAuth install page and Slack's redirect back (404 with a single workspace)."""
    return handler().handle(request)


def socket_mode_handler(app: Flask) -> SocketModeHandler:
    """The same Bolt app over Socket Mode (no public URL needed: local development)."""
    settings: Settings = app.config["HITL_SETTINGS"]
    if not settings.slack_app_token:
        raise ConfigurationError("Socket Mode needs SLACK_APP_TOKEN (an app-level xapp- token)")
    mounted: SlackRequestHandler = app.extensions["slack"]
    return SocketModeHandler(mounted.app, settings.slack_app_token)
