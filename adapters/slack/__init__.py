"""Slack: approvals as buttons, questions as menus, answers settled from Slack (built on slack-sdk)."""

from .admission import TURNED_AWAY, Admission
from .body import read_body
from .channel import SlackChannel, turned_away_notice
from .client import BotToken, BotTokens, InstalledBots, SlackClient
from .errors import SlackApiError, SlackError, SlackParseError, SlackSetupError, SlackVerificationError
from .inbound import Listeners, SlackWebhooks
from .installs import SCOPES, OAuthApp, bolt_app, installation_store
from .interactions import (
    Click,
    EditSubmission,
    Typed,
    edited_input,
    parse_block_actions,
    parse_edit_submission,
    parse_view_submission,
)
from .parse import ANSWER_VIEW, EDIT_VIEW, Said, Where, parse_mention, parse_message
from .render import answer_modal, edit_modal, modal_errors
from .verify import verify_slack_signature

__all__ = [
    "ANSWER_VIEW",
    "SCOPES",
    "TURNED_AWAY",
    "Admission",
    "Listeners",
    "OAuthApp",
    "SlackSetupError",
    "SlackWebhooks",
    "bolt_app",
    "installation_store",
    "BotToken",
    "BotTokens",
    "Click",
    "EDIT_VIEW",
    "EditSubmission",
    "InstalledBots",
    "Said",
    "SlackApiError",
    "SlackChannel",
    "SlackClient",
    "SlackError",
    "SlackParseError",
    "SlackVerificationError",
    "Typed",
    "Where",
    "answer_modal",
    "edit_modal",
    "edited_input",
    "modal_errors",
    "parse_block_actions",
    "parse_edit_submission",
    "parse_mention",
    "parse_message",
    "parse_view_submission",
    "read_body",
    "turned_away_notice",
    "verify_slack_signature",
]
