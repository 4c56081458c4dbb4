"""`POST /twilio/sms`: the Flask shim over adapters.twilio, and the channel's factory for the composition root."""

from __future__ import annotations

import logging

from flask import Blueprint, Response, abort, current_app

from adapters.twilio import (
    MESSAGING_SERVICE,
    TWILIO_NUMBER,
    TwilioChannel,
    TwilioConfig,
    TwilioParseError,
    TwilioSenderRefused,
    TwilioVerificationError,
    parse_allow_list,
)
from engine.channels.port import ChannelPort
from engine.jobs.runtime import Runtime

from .settings import ConfigurationError, Settings, half_configured
from .webhooks import webhook_request, webhook_response

log = logging.getLogger(__name__)

bp = Blueprint("twilio", __name__, url_prefix="/twilio")


@bp.post("/sms")
def sms() -> Response:
    rt: Runtime = current_app.extensions["hitl"]
    channel = rt.channels.get(TwilioChannel.name)
    if not isinstance(channel, TwilioChannel):
        abort(404)
    try:
        reply = channel.receive(ChannelPort(rt, channel.name), webhook_request(form=True))
    except (TwilioVerificationError, TwilioSenderRefused) as exc:
        log.warning("refused a Twilio webhook: %s", exc)
        return Response("", 403)
    except TwilioParseError as exc:
        log.warning("a signed Twilio webhook that is not an incoming message: %s", exc)
        return Response("", 400)
    return webhook_response(reply)


def twilio_channel(settings: Settings) -> TwilioChannel | None:
    """The SMS (and WhatsApp) channel when any Twilio credential (TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN,
    TWILIO_FROM) is set; fails at start-up naming what else is missing."""
    account, token, sender = settings.twilio_account_sid, settings.twilio_auth_token, settings.twilio_from
    if not (account or token or sender):
        return None
    base_url = settings.public_base_url
    if not (account and token and sender and base_url):
        raise half_configured("Twilio", {"TWILIO_ACCOUNT_SID": account, "TWILIO_AUTH_TOKEN": token,
                                         "TWILIO_FROM": sender, "PUBLIC_BASE_URL": base_url})
    if not (TWILIO_NUMBER.match(sender) or MESSAGING_SERVICE.match(sender)):
        raise ConfigurationError("TWILIO_FROM is an E.164 number, a WhatsApp sender (whatsapp:+E.164) or a "
                                 f"Messaging Service SID (MG...), not {sender!r}")
    if not base_url.startswith(("https://", "http://")):
        raise ConfigurationError(f"PUBLIC_BASE_URL is the gateway's public URL (https://...), not {base_url!r}")
    try:
        allow_from = parse_allow_list(settings.twilio_allow_from)
    except ValueError as exc:
        raise ConfigurationError(str(exc)) from exc
    if not allow_from:
        log.warning("TWILIO_ALLOW_FROM is empty: every incoming SMS will be refused")
    return TwilioChannel(TwilioConfig(account_sid=account, auth_token=token, sender=sender,
                                      public_base_url=base_url, allow_from=allow_from,
                                      api_url=settings.twilio_api_url))
