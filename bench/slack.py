"""Slack for the bench: the fake Slack Web API in a process of its own, and signed `block_actions` clicks.

`python -m bench.slack` serves tests/support/fake_slack.py and prints its URL; the gateway's web processes
and workers are pointed at it with SLACK_API_URL, so the whole Slack path runs (auth.test at start, the
webhook, inbound items, cards posted and updated by delivery jobs).
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from itertools import count
from urllib.parse import urlencode

from adapters.slack import BotToken, SlackChannel, SlackClient
from adapters.slack.parse import slack_principal
from tests.support.fake_slack import TEAM, FakeSlack
from tests.support.signing import slack_headers

from .measure import HttpRequest
from .seed import Parked, park_template
from .stack import ROOT, Process, Target, wait_for

SECRET = "bench-signing-secret"
TOKEN = "xoxb-bench"
USER, CHANNEL = "UBENCH", "C0BENCH"
ADDRESS = f"slack::{CHANNEL}:1700000000.000001"
"""The place every bench session lives (one workspace, so the team is left out of the address)."""
CLICKER = slack_principal(USER, TEAM, CHANNEL)
"""Who starts the turns and clicks Approve: the requester, whom the default response policy lets settle, of the
workspace the fake's `auth.test` names (the gateway hears only people of the workspaces it serves)."""

_action_clock = count(1)


def env(api_url: str) -> dict[str, str]:
    return {"SLACK_BOT_TOKEN": TOKEN, "SLACK_SIGNING_SECRET": SECRET, "SLACK_API_URL": api_url}


def start_fake(target: Target) -> tuple[Process, str]:
    """The fake Slack Web API process, and its URL once it listens."""
    process = Process("fake-slack", [sys.executable, "-m", "bench.slack"],
                      dict(os.environ, PYTHONPATH=str(ROOT)), target.logs)

    def url() -> str | None:
        return next((line for line in process.output().splitlines() if line.startswith("http://")), None)

    wait_for(lambda: url() is not None or not process.alive(), 30, "the fake Slack Web API")
    found = url()
    if found is None:
        raise RuntimeError(f"the fake Slack Web API did not start; see {process.log_path}")
    return process, found


def click(parked: Parked) -> HttpRequest:
    """A signed `block_actions` interaction: the clicker presses Approve (option 1) on the request's card."""
    n = next(_action_clock)
    payload = {
        "type": "block_actions",
        "user": {"id": USER, "username": "bench", "name": "bench", "team_id": TEAM},
        "team": {"id": TEAM, "domain": "bench"},
        "container": {"type": "message", "message_ts": "1700000001.000001", "channel_id": CHANNEL},
        "channel": {"id": CHANNEL, "name": "bench"},
        "trigger_id": f"{n}.bench",
        "actions": [{"type": "button", "action_id": f"hitl|{parked.request_id}|1", "block_id": "b", "value": "1",
                     "action_ts": f"{int(time.time())}.{n:06d}"}],
    }
    body = urlencode({"payload": json.dumps(payload)}).encode()
    headers = slack_headers(SECRET, body, content_type="application/x-www-form-urlencoded")
    return HttpRequest("POST", "/slack/interactions", body, headers)


def park_slack_template(target: Target, api_url: str) -> Parked:
    """The template turn at the bench's Slack place, started by the clicker; its card posted to the fake."""
    adapter = SlackChannel(SlackClient(BotToken(TOKEN), api_url))
    return park_template(target, principal=CLICKER, channel="slack", address=ADDRESS, adapter=adapter)


def main() -> None:
    fake = FakeSlack().start()
    print(fake.url, flush=True)
    threading.Event().wait()


if __name__ == "__main__":
    main()
