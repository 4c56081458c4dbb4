"""`GithubChannel`: requests shown as comments on an issue or pull request, one at a time, in order.

A session's address is `github:<owner>/<repo>:<issue number>` (owner and repo lower-cased: GitHub treats them
case-insensitively). `show` posts a prompt and returns the comment id; `update` edits that comment so it loses
its how-to line and names the outcome and who answered; `refuse` replies to the refused person with the
policy's reason; `acknowledge` reacts to the comment a person wrote: 👀 on receipt, 👍 when it settled a
request, 👎 when a response policy refused it or the channel ignored it; `notify` tells a person once per issue
why their comments are ignored, or why an `/approve` with fields was not applied.

Inbound (`receive`, behind the gateway's `POST /github/webhook`): verify, parse, dedupe and store; the only
GitHub call on that path is the (cached) permission lookup of a person whose comment asks something. A person
whose role ranks below `min_permission` (GITHUB_MIN_PERMISSION), or whose role GitHub could not give (fail
closed), asks nothing: the comment is stored as ignored, never a message, an answer or a steer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any

from engine.channels.contract import (
    Answers,
    ChannelUnavailable,
    Ignored,
    InboundItem,
    Message,
    QueuePosition,
    Reminder,
    SessionInfo,
    WebhookReply,
    WebhookRequest,
)
from engine.channels.port import ChannelPort
from engine.errors import GroupLookupFailed
from engine.protocol import InputRequestOut, InputResponse, Principal

from .client import CollaboratorRole, GithubClient
from .errors import GithubError
from .parse import (
    CommentReply,
    PingEvent,
    RefusedEdit,
    github_principal,
    parse_github_event,
    read_delivery,
    reply_response,
)
from .render import (
    render_message,
    render_progress_comment,
    render_prompt,
    render_refusal,
    render_refused_edit,
    render_reminder_comment,
    render_settled_prompt,
    render_turned_away,
)
from .verify import SIGNATURE_HEADER, verify_github_signature

log = logging.getLogger(__name__)

REPOSITORY = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})/[A-Za-z0-9._-]{1,100}$")
ACCOUNT = re.compile(r"github:([0-9]+)")
"""A GitHub principal id: its account id (github_principal, adapters/github/parse.py)."""
REACTIONS = {"received": "eyes", "settled": "+1", "refused": "-1", "ignored": "-1"}
ROLES = ("none", "read", "triage", "write", "maintain", "admin")
"""GitHub's repository roles, least first."""
ANYONE = ("none", "any")
MIN_PERMISSIONS = (*ROLES[1:], *ANYONE)
"""What GITHUB_MIN_PERMISSION may be: a role, or `none` / `any` for anyone who can comment."""


def rank(role: CollaboratorRole) -> int:
    """The role's place in ROLES; a custom role ranks as the base role GitHub gives for it (its `permission`:
    a custom role inheriting triage is `read`, one inheriting maintain is `write`), so it never ranks higher."""
    name = role.name if role.name in ROLES else role.base
    return ROLES.index(name) if name in ROLES else 0


def github_address(repository: str, issue: int) -> str:
    return f"github:{repository.lower()}:{issue}"


def address_place(address: str) -> tuple[str, int]:
    """(repository, issue number) of a session address."""
    channel, repository, issue = address.split(":")
    if channel != "github" or not REPOSITORY.match(repository) or not issue.isdigit():
        raise ValueError(f"{address!r} is not a GitHub session address")
    return repository, int(issue)


class GithubChannel:
    name = "github"
    update_edits = True
    one_at_a_time = True

    def __init__(self, client: GithubClient, bot_login: str, webhook_secret: str,
                 min_permission: str = "write") -> None:
        if min_permission not in MIN_PERMISSIONS:
            raise ValueError(f"min_permission is one of {', '.join(MIN_PERMISSIONS)}, not {min_permission!r}")
        self.client = client
        self.bot_login = bot_login
        self.webhook_secret = webhook_secret
        self.min_permission = min_permission

    def address(self, data: dict[str, Any]) -> str:
        """`{repo: "owner/name", issue: N}`: the issue or pull request whose comments hold the session."""
        repository, issue = data.get("repo"), data.get("issue")
        if not isinstance(repository, str) or not REPOSITORY.match(repository):
            raise ValueError("a GitHub address needs `repo` as \"owner/name\"")
        if isinstance(issue, bool) or not isinstance(issue, int) or issue < 1:
            raise ValueError("a GitHub address needs `issue`, the issue or pull request number")
        return github_address(repository, issue)

    def show(self, session: SessionInfo, request: InputRequestOut, position: QueuePosition) -> str:
        repository, issue = address_place(session.address)
        return str(self.client.create_comment(repository, issue, render_prompt(request, position)))

    def update(self, session: SessionInfo, request: InputRequestOut, ref: str | None) -> None:
        repository, issue = address_place(session.address)
        if ref is None:
            self.client.create_comment(repository, issue, render_settled_prompt(request))
        else:
            self.client.update_comment(repository, int(ref), render_settled_prompt(request))

    def say(self, session: SessionInfo, text: str) -> str:
        repository, issue = address_place(session.address)
        return str(self.client.create_comment(repository, issue, render_message(text)))

    def remind(self, session: SessionInfo, request: InputRequestOut, ref: str, reminder: Reminder) -> str:
        """A comment mentioning who asked and the GitHub accounts among the approvers its escalation added (by
        login: `logins`); a reply to the prompt still answers the prompt (the reminder is no
        prompt: `replied_to` takes the prompt posted last before a reply)."""
        repository, issue = address_place(session.address)
        approvers = self.logins(reminder.approvers)
        return str(self.client.create_comment(repository, issue, render_reminder_comment(request, approvers)))

    def logins(self, principal_ids: Sequence[str]) -> list[str]:
        """The logins of the GitHub accounts among `principal_ids` (`github:<account id>`), asked of GitHub (and
        cached by the client); an account GitHub does not tell about is logged and left out."""
        found = []
        for principal_id in principal_ids:
            account = ACCOUNT.fullmatch(principal_id)
            if account is None:
                continue
            try:
                found.append(self.client.login(int(account[1])))
            except (ChannelUnavailable, GithubError) as exc:
                log.warning("not mentioning %s: GitHub did not give its login (%s)", principal_id, exc)
        return found

    def progress(self, session: SessionInfo, request: InputRequestOut, ref: str,
                 elsewhere: Principal | None = None) -> str | None:
        """A comment with the count of an approval that takes several people: "1 of 2 approvals: Alice Ng ...", on
        the request's own issue, and on another issue showing it only for a GitHub approver (who may have answered
        there; one who answered by another channel was told there)."""
        if elsewhere is not None and elsewhere.authenticator != "github":
            return None
        repository, issue = address_place(session.address)
        return str(self.client.create_comment(repository, issue, render_progress_comment(request)))

    def refuse(self, session: SessionInfo, request: InputRequestOut, responder: Principal, reason: str) -> None:
        """Reply to a GitHub responder (anyone else was told by the channel they answered through)."""
        if responder.authenticator != "github":
            return
        repository, issue = address_place(session.address)
        self.client.create_comment(repository, issue, render_refusal(request, responder, reason))

    def group_members(self, kind: str, ref: str) -> frozenset[str]:
        """The principal ids (`github:<user id>`) of a team's members; `ref` is `<org>/<team slug>`.
        GroupLookupFailed when GitHub cannot say (no such team, a token that may not read it, GitHub down)."""
        org, _, slug = ref.partition("/")
        if kind != "github-team" or not org or not slug:
            raise GroupLookupFailed(f"GitHub has no group {kind}:{ref}")
        try:
            return frozenset(f"github:{user}" for user in self.client.team_members(org, slug))
        except (GithubError, ChannelUnavailable) as exc:
            raise GroupLookupFailed(f"GitHub answered: {exc}") from exc

    def acknowledge(self, ref: str, status: str) -> None:
        """React to the comment `ref` (`<owner>/<repo>:<comment id>`) for what became of it."""
        content = REACTIONS.get(status)
        if content is not None:
            repository, _, comment_id = ref.rpartition(":")
            self.client.add_reaction(repository, int(comment_id), content)

    def notify(self, notice: Mapping[str, Any]) -> None:
        """Post the reply an ignored comment's notice holds (see `turned_away`)."""
        self.client.create_comment(notice["repository"], int(notice["issue"]), notice["text"])

    def responder(self, reply: CommentReply) -> tuple[Principal, str | None]:
        """The comment's author as a principal, with their role on the repository from the collaborators
        permission API (never `author_association`; `permission` is None when GitHub could not be asked), and
        why the channel ignores them: None when they may use it, `permission` below `min_permission`,
        `permission-unknown` when GitHub could not be asked (fail closed; with `none` / `any` it does not matter)."""
        anyone = self.min_permission in ANYONE
        try:
            role = self.client.role(reply.repository, reply.login)
        except (ChannelUnavailable, GithubError):
            log.warning("no permission for %s on %s; %s", reply.login, reply.repository,
                        "the principal says None" if anyone else
                        f"their comment {reply.comment_id} is ignored (GITHUB_MIN_PERMISSION={self.min_permission} "
                        "fails closed; it is not retried)", exc_info=True)
            return github_principal(reply, None), None if anyone else "permission-unknown"
        principal = github_principal(reply, role.name)
        if anyone or rank(role) >= ROLES.index(self.min_permission):
            return principal, None
        log.info("ignored comment %s by %s on %s#%s: role %s is below GITHUB_MIN_PERMISSION=%s", reply.comment_id,
                 reply.login, reply.repository, reply.issue, role.name, self.min_permission)
        return principal, "permission"

    # -- inbound, from the gateway's webhook ------------------------------------------------------------

    def receive(self, port: ChannelPort, webhook: WebhookRequest) -> WebhookReply:
        """Handle one delivery; the reply says what became of it: `{"status": "accepted"}` (202: stored, a job
        applies it), or `pong`, `ignored` or `duplicate` (200). Raises GithubVerificationError (not signed with
        our secret) or GithubParseError (signed but unreadable), both without effect.

        A comment is stored under its comment id: a redelivery (same hook and delivery id) carries the same
        comment, and so does the same comment sent to a second hook, so one key dedupes both. Anything else
        (pings, edits, chatter, bots) is kept for the audit trail under (hook id, delivery id).
        """
        verify_github_signature(self.webhook_secret, webhook.body, webhook.headers.get(SIGNATURE_HEADER.lower()))
        delivery = read_delivery(webhook.headers)
        event = parse_github_event(delivery.event, webhook.body, self.bot_login)
        if not isinstance(event, CommentReply):
            fresh = port.accept(delivery.key, None, webhook.body, None)
            return outcome(("pong" if isinstance(event, PingEvent) else "ignored") if fresh else "duplicate")
        item = self.inbound_item(port, event)
        principal, turned_away = self.responder(event) if item is not None else (None, None)
        if turned_away is not None:
            item = self.turned_away(event, turned_away)
        fresh = port.accept(f"comment:{event.comment_id}", principal, webhook.body, item)
        acts = item is not None and turned_away is None
        return outcome(("accepted" if acts else "ignored") if fresh else "duplicate")

    def turned_away(self, reply: CommentReply, why: str) -> Ignored:
        """The ignored item of a comment whose writer may not use the bot: 👎 on it, and the first time per
        person, issue and reason a reply saying why."""
        once = f"{reply.repository.lower()}:{reply.issue}:{reply.user_id}:{why}"
        floor = self.min_permission if why == "permission" else None
        notice = {"repository": reply.repository, "issue": reply.issue,
                  "text": render_turned_away(reply.login, floor)}
        return Ignored(why, ref=reply.ref, notice=notice, once=once)

    def inbound_item(self, port: ChannelPort, reply: CommentReply) -> InboundItem | None:
        """A message to the issue's session, or a command's response to the prompt it replies to (None: the
        command answers nothing, e.g. `/approve` with no prompt shown, or `/answer 7` of two options)."""
        address = github_address(reply.repository, reply.issue)
        if reply.kind == "message":
            return Message(address, reply.text or "", ref=reply.ref)
        prompt = replied_to(port.shown_requests(address), reply.comment_id)
        response = reply_response(reply, prompt) if prompt is not None else None
        if isinstance(response, InputResponse) and response.input is not None and prompt is not None:
            problems = port.edit_problems(response.request_id, response.input)  # checked against the tool now
            response = RefusedEdit(prompt, problems) if problems else response
        if isinstance(response, RefusedEdit):
            notice = {"repository": reply.repository, "issue": reply.issue,
                      "text": render_refused_edit(reply.login, response.request, response.problems)}
            return Ignored("edit-refused", ref=reply.ref, notice=notice, once=f"edit:{reply.comment_id}")
        return Answers((response,), ref=reply.ref) if response is not None else None


def outcome(status: str) -> WebhookReply:
    """What became of a delivery, as GitHub is answered: 202 when `accepted` (stored, a job applies it), else 200."""
    return WebhookReply.json(202 if status == "accepted" else 200, {"status": status})


def replied_to(shown: list[tuple[str, InputRequestOut]], comment_id: int) -> InputRequestOut | None:
    """The prompt posted last before the reply, i.e. what its writer saw (GitHub's comment ids grow with time):
    a reply to a prompt that closed meanwhile stays a (late) answer to it, never to the one posted after it."""
    earlier = [(int(ref), request) for ref, request in shown if int(ref) < comment_id]
    return max(earlier, key=lambda pair: pair[0])[1] if earlier else None
