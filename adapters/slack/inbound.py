"""Slack's inbound side: its webhooks through the Bolt app, and the Bolt listeners that make inbound items.

* Events and interactivity (`SlackWebhooks.receive`): the signature is checked on the raw body (a
  SlackVerificationError, no effect), the body is read as Bolt will read it (a SlackParseError), then Bolt's
  listeners store an inbound item through the engine's `ChannelPort` and ack. No Web API call in the request
  path, except `views.open` for the "Type an answer" and "Edit" modals (a trigger lives 3 seconds). A submitted
  edit is checked against the tool before it is stored: what does not fit is shown in the modal
  (`response_action: errors`).
* Only people of the allowed teams are heard (adapters/slack/admission.py): anyone else's message, click or
  modal is stored as ignored, and they are told once per channel (an ephemeral message, posted by the job).
* The OAuth install page and Slack's redirect back (`SlackWebhooks.oauth`), with several workspaces.
"""

from __future__ import annotations

import logging
import re
from dataclasses import replace
from typing import Any

from slack_bolt import Ack, App, BoltContext, BoltRequest, BoltResponse
from slack_sdk import WebClient
from slack_sdk.errors import SlackClientError

from engine.channels.contract import (
    Answers,
    Choice,
    Ignored,
    InboundItem,
    Message,
    RequestStatus,
    WebhookReply,
    WebhookRequest,
)
from engine.channels.port import ChannelPort
from engine.protocol import InputResponse, Principal

from .admission import TURNED_AWAY, Admission
from .body import read_body
from .channel import SlackChannel, turned_away_notice
from .errors import SlackParseError
from .interactions import Click, edited_input, parse_block_actions, parse_edit_submission, parse_view_submission
from .parse import ANSWER_VIEW, EDIT_VIEW, Said, Where, parse_mention, parse_message
from .render import answer_modal, edit_modal, modal_errors
from .verify import verify_slack_signature

log = logging.getLogger(__name__)


class SlackWebhooks:
    """The Bolt app `app` behind the gateway's `/slack/*` routes, in the channel contract's neutral terms."""

    def __init__(self, app: App, signing_secret: str) -> None:
        self.app, self.signing_secret = app, signing_secret

    def receive(self, request: WebhookRequest) -> WebhookReply:
        """Events API and interactivity. Raises SlackVerificationError (not signed by Slack with our secret) or
        SlackParseError (a signed body Bolt could not read: Bolt reads it before any listener, or its error
        handler, runs), both without effect."""
        verify_slack_signature(self.signing_secret, request.headers.get("x-slack-request-timestamp"),
                               request.headers.get("x-slack-signature"), request.body)
        read_body(request.body, request.headers.get("content-type"))
        return reply(self.app.dispatch(bolt_request(request)))

    def oauth(self, request: WebhookRequest) -> WebhookReply:
        """The OAuth install page and Slack's redirect back (404 with a single workspace)."""
        flow = self.app.oauth_flow
        if flow is not None and request.path == flow.install_path:
            return reply(flow.handle_installation(bolt_request(request)))
        if flow is not None and request.path == flow.redirect_uri_path:
            return reply(flow.handle_callback(bolt_request(request)))
        return WebhookReply(404, "Not Found")


def bolt_request(request: WebhookRequest) -> BoltRequest:
    return BoltRequest(body=request.body.decode("utf-8", errors="replace"), query=request.query,
                       headers=dict(request.headers))


def reply(response: BoltResponse) -> WebhookReply:
    headers = tuple((name, value) for name, values in response.headers.items() for value in values)
    return WebhookReply(response.status, response.body, headers)


class Listeners:
    """Each listener turns a verified payload into an inbound item (`ChannelPort.accept`: deduplicated, stored, a
    job enqueued) and acks; the job does the rest. A person the admission turns away gets an ignored item
    instead, whose notice tells them why, once per channel."""

    def __init__(self, port: ChannelPort, channel: SlackChannel, admission: Admission) -> None:
        self.port, self.channel, self.admission = port, channel, admission

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
        if said.direct or self.port.has_session(address):
            self.take(said, address, context, request)

    def take(self, said: Said, address: str, context: BoltContext, request: BoltRequest) -> None:
        admitted = self.admission.admits(said.principal, context)
        item = Message(address, said.text) if admitted else self.turned_away(said.principal, said.where)
        self.store(said.event_id, said.principal, request, item)

    def click(self, ack: Ack, body: dict[str, Any], context: BoltContext, request: BoltRequest,
              client: WebClient) -> None:
        click = parse_block_actions(body)
        if not self.admission.admits(click.principal, context):
            where = interaction_place(context, click.channel_id, click.thread_ts)
            self.store(click.external_id, click.principal, request, self.turned_away(click.principal, where))
        elif click.position is None:  # "type an answer" or "edit": a modal shows the request
            shown = self.port.find_request(click.request_id)
            if shown is not None and click.control == "edit":
                if shown.editable and shown.status == RequestStatus.PENDING:
                    open_modal(client, click, edit_modal(shown, click.channel_id))
            elif shown is not None:
                open_modal(client, click, answer_modal(shown, click.channel_id))
        else:  # the job that applies it looks the option up (a click on a card we do not know: audit only)
            self.store(click.external_id, click.principal, request, Choice(click.request_id, click.position))
        ack()

    def typed(self, ack: Ack, body: dict[str, Any], context: BoltContext, request: BoltRequest) -> None:
        typed = parse_view_submission(body)
        item: InboundItem
        if self.admission.admits(typed.principal, context):
            item = Answers((InputResponse(request_id=typed.request_id, text=typed.text),))
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
        shown = self.port.find_request(submission.request_id)
        if shown is None:
            raise SlackParseError(f"an edit of no known request ({submission.request_id})")
        data, problems = edited_input(submission, shown)
        problems = problems or self.port.edit_problems(shown.request_id, data)
        if problems:
            ack(response_action="errors", errors=modal_errors(shown, problems))
            return
        response = InputResponse(request_id=shown.request_id, option_id="approve", input=data)
        self.store(submission.external_id, submission.principal, request, Answers((response,)))
        ack()

    def turned_away(self, principal: Principal, where: Where | None) -> Ignored:
        """The ignored item of a person of no allowed team; its notice tells them why where they wrote or
        clicked (`where`; None: nowhere to tell them), the first time per person and channel."""
        if where is None:
            return Ignored(TURNED_AWAY)
        channel = self.channel.address_of(replace(where, thread_ts=""))
        notice = turned_away_notice(self.channel.address_of(where), str(principal.attributes["userId"]))
        return Ignored(TURNED_AWAY, notice=notice, once=f"{TURNED_AWAY}:{channel}:{principal.principal_id}")

    def turned_away_from_modal(self, principal: Principal, context: BoltContext) -> Ignored:
        """`turned_away` for a modal's submission, told in the channel its card was in."""
        return self.turned_away(principal, interaction_place(context, principal.attributes.get("channelId"), ""))

    def store(self, external_id: str, principal: Principal, request: BoltRequest, item: InboundItem | None) -> None:
        """Once per platform id: a retry or a replay is counted (for the metrics) and changes nothing."""
        self.port.accept(external_id, principal, request.raw_body.encode(), item)


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


def open_modal(client: WebClient, click: Click, view: dict[str, Any]) -> None:
    try:
        client.views_open(trigger_id=click.trigger_id, view=view)
    except SlackClientError as exc:  # the person can still reply in the thread, or approve as proposed
        log.warning("could not open the %s modal of %s: %s", click.control, click.request_id, exc)
