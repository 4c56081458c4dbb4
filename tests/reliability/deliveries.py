"""Webhook deliveries as Slack, Twilio and GitHub send them (signed, each with its platform id), posted over HTTP
to a live gateway, and sent again as a platform does: after a 5xx or a dropped connection, or many times at once."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlencode

import requests

from tests.github.support import HOOK_ID, REPO, Github, Person, comment_event
from tests.github.support import SECRET as GITHUB_SECRET
from tests.slack.workspace import SECRET as SLACK_SECRET
from tests.slack.workspace import Workspace
from tests.support.fake_slack import Message
from tests.support.signing import github_signature, slack_headers, twilio_signature
from tests.twilio.support import AUTH_TOKEN, WEBHOOK_URL, Sms

FORM = "application/x-www-form-urlencoded"


@dataclass(frozen=True)
class Delivery:
    """One delivery: where it goes, its exact body and headers (a redelivery sends the same)."""

    path: str
    body: bytes
    headers: dict[str, str]

    def send(self, base_url: str, http: requests.Session | None = None) -> requests.Response:
        return (http or requests).post(base_url + self.path, data=self.body, headers=self.headers, timeout=60)

    def at_once(self, base_url: str, times: int) -> list[int]:
        """Send it `times` times at once, each from a thread of its own: the statuses answered."""
        start = threading.Barrier(times)
        statuses: list[int] = []

        def send() -> None:
            with requests.Session() as http:
                start.wait()
                statuses.append(self.send(base_url, http).status_code)

        threads = [threading.Thread(target=send) for _ in range(times)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        return statuses


def redelivered(send: Callable[[], requests.Response], attempts: int = 100) -> int:
    """Send until the answer is below 500, as a platform redelivers after a 5xx or a dropped connection (and a
    careful API client retries): the status it ended with."""
    status = 0
    for _ in range(attempts):
        try:
            status = send().status_code
        except requests.ConnectionError:
            status = 599
        if status < 500:
            return status
        time.sleep(0.05)
    return status


def slack_click(slack: Workspace, who: str, card: Message, label: str) -> Delivery:
    """`who` presses `label` on `card` (its platform id: the action's timestamp)."""
    body = urlencode({"payload": json.dumps(slack.click_payload(who, card, label))})
    return Delivery("/slack/interactions", body.encode(), slack_headers(SLACK_SECRET, body, content_type=FORM))


def sms(phone: Sms, sender: str, text: str) -> Delivery:
    """`sender` texts `text` (its platform id: the MessageSid)."""
    form = phone.form(sender, text)
    signature = twilio_signature(AUTH_TOKEN, WEBHOOK_URL, form)
    return Delivery("/twilio/sms", urlencode(form).encode(), {"Content-Type": FORM, "X-Twilio-Signature": signature})


def github_comment(github: Github, who: Person, text: str, issue: int) -> Delivery:
    """`who` comments `text` on the issue (its platform ids: the comment's id and the delivery's GUID)."""
    comment = github.fake.add_comment(REPO, issue, who.login, text)
    body = json.dumps(comment_event(text, who, comment.id, issue=issue)).encode()
    return Delivery("/github/webhook", body, {
        "Content-Type": "application/json", "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": f"delivery-{comment.id}", "X-GitHub-Hook-ID": str(HOOK_ID),
        "X-Hub-Signature-256": github_signature(GITHUB_SECRET, body), "User-Agent": "GitHub-Hookshot/test"})
