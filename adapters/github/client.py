"""A small GitHub REST client on `requests`: issue comments, reactions, collaborator permissions and logins.

`api_url` is https://api.github.com, a GitHub Enterprise server's `https://<host>/api/v3`, or a test server.
Rate limits, 5xx answers and network failures raise `engine.channels.contract.ChannelUnavailable`: a delivery
GitHub told when to come back (`Retry-After`, or a spent rate limit's reset time) waits until then, any other fails
the job, which is retried; any other refusal raises GithubApiError, a refusal for good
(engine.channels.contract.ChannelRefused).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import requests

from engine.channels.contract import ChannelUnavailable

from .errors import GithubApiError

API_VERSION = "2022-11-28"
PERMISSION_TTL = 60.0
"""Seconds a collaborator's role is reused (per process): a burst of replies asks GitHub once."""
MEMBERS_PER_PAGE = 100
MAX_MEMBER_PAGES = 10
"""A team's members are read 100 a page, at most 1,000 of them (a larger team is refused as approvers)."""
LOGIN_TTL = 3600.0
"""Seconds an account's login is reused (per process; a login can change, its account id never does)."""


@dataclass(frozen=True)
class CollaboratorRole:
    """A person's role on a repository, as the collaborators permission API gives it."""

    name: str
    """`role_name`: admin, maintain, write, triage, read, a custom role's name, or none."""
    base: str
    """`permission`, GitHub's legacy base role of it: admin, write (also for maintain), read (also for triage),
    or none. A custom role's base is the one it inherits, so it is what ranks a custom role."""


class GithubClient:
    def __init__(self, token: str, api_url: str = "https://api.github.com", *, timeout: float = 10.0,
                 permission_timeout: float = 3.0, clock: Callable[[], float] = time.monotonic) -> None:
        self.api_url = api_url.rstrip("/")
        self.timeout = timeout
        self.permission_timeout = permission_timeout
        self.clock = clock
        self.http = requests.Session()
        self.http.headers.update({
            "Authorization": f"Bearer {token}", "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": API_VERSION, "User-Agent": "hitl-gateway",
        })
        self._roles: dict[tuple[str, str], tuple[CollaboratorRole, float]] = {}
        self._logins: dict[int, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def create_comment(self, repository: str, issue: int, body: str) -> int:
        """Post a comment on an issue or pull request; its id."""
        created = self.call("POST", f"/repos/{repository}/issues/{issue}/comments", {"body": body}).json()
        return int(created["id"])

    def update_comment(self, repository: str, comment_id: int, body: str) -> None:
        self.call("PATCH", f"/repos/{repository}/issues/comments/{comment_id}", {"body": body})

    def add_reaction(self, repository: str, comment_id: int, content: str) -> bool:
        """React to a comment: True when the reaction is new (201), False when it was there already (200)."""
        path = f"/repos/{repository}/issues/comments/{comment_id}/reactions"
        return self.call("POST", path, {"content": content}).status_code == 201

    def role(self, repository: str, login: str) -> CollaboratorRole:
        """The person's role and its base role (none for someone GitHub says is no collaborator, a 404), reused
        for PERMISSION_TTL seconds. Raises ChannelUnavailable or GithubApiError when GitHub cannot be asked."""
        key, now = (repository.lower(), login.lower()), self.clock()
        with self._lock:
            cached = self._roles.get(key)
        if cached is not None and cached[1] > now:
            return cached[0]
        try:
            answer = self.call("GET", f"/repos/{repository}/collaborators/{login}/permission",
                               timeout=self.permission_timeout).json()
            base = str(answer.get("permission") or "none")
            role = CollaboratorRole(str(answer.get("role_name") or base), base)
        except GithubApiError as exc:
            if exc.status != 404:
                raise
            role = CollaboratorRole("none", "none")  # not a collaborator GitHub will tell us about
        with self._lock:
            self._roles[key] = (role, now + PERMISSION_TTL)
        return role

    def team_members(self, org: str, slug: str) -> list[int]:
        """The numeric user ids of a team's members, its child teams' included (GET /orgs/{org}/teams/{slug}/
        members, every page). Raises ChannelUnavailable or GithubApiError (404: no such team, or the token may
        not see it)."""
        ids: list[int] = []
        for page in range(1, MAX_MEMBER_PAGES + 1):
            members = self.call("GET", f"/orgs/{org}/teams/{slug}/members?per_page={MEMBERS_PER_PAGE}&page={page}",
                                timeout=self.permission_timeout).json()
            ids.extend(int(member["id"]) for member in members)
            if len(members) < MEMBERS_PER_PAGE:
                return ids
        raise GithubApiError(413, f"team {org}/{slug} has more than {MAX_MEMBER_PAGES * MEMBERS_PER_PAGE} members")

    def login(self, account_id: int) -> str:
        """The login of the account `account_id` (`GET /user/{account_id}`), reused for LOGIN_TTL seconds. Raises
        ChannelUnavailable or GithubApiError (an unknown account: 404) when GitHub does not say."""
        now = self.clock()
        with self._lock:
            cached = self._logins.get(account_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        login = str(self.call("GET", f"/user/{account_id}", timeout=self.permission_timeout).json()["login"])
        with self._lock:
            self._logins[account_id] = (login, now + LOGIN_TTL)
        return login

    def call(self, method: str, path: str, body: dict[str, Any] | None = None,
             timeout: float | None = None) -> requests.Response:
        try:
            response = self.http.request(method, self.api_url + path, json=body, timeout=timeout or self.timeout)
        except requests.RequestException as exc:
            raise ChannelUnavailable(f"GitHub {method} {path} failed: {exc}") from exc
        if rate_limited(response) or response.status_code >= 500:
            raise ChannelUnavailable(f"GitHub {method} {path} answered {response.status_code}: {message(response)}",
                                     retry_after=retry_after(response))
        if response.status_code >= 400:
            raise GithubApiError(response.status_code, f"{message(response)} ({method} {path})")
        return response


def rate_limited(response: requests.Response) -> bool:
    """429, or GitHub's 403 for a spent primary limit (`X-RateLimit-Remaining: 0`) or a secondary limit."""
    if response.status_code == 429:
        return True
    return response.status_code == 403 and (
        response.headers.get("X-RateLimit-Remaining") == "0" or "Retry-After" in response.headers
        or "rate limit" in message(response).lower()
    )


def retry_after(response: requests.Response) -> float | None:
    """Seconds until GitHub takes calls again, when it said."""
    try:
        if "Retry-After" in response.headers:
            return max(0.0, float(response.headers["Retry-After"]))
        if response.headers.get("X-RateLimit-Remaining") == "0" and "X-RateLimit-Reset" in response.headers:
            return max(0.0, float(response.headers["X-RateLimit-Reset"]) - time.time())
    except ValueError:
        pass
    return None


def message(response: requests.Response) -> str:
    try:
        return str(response.json().get("message") or response.reason)
    except (ValueError, AttributeError):
        return (response.text or response.reason or "")[:200]
