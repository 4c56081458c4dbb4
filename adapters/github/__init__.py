"""GitHub issue and pull-request comments as a text channel: verify, parse, render, client, channel."""

from .channel import MIN_PERMISSIONS, GithubChannel, address_place, github_address
from .client import CollaboratorRole, GithubClient
from .errors import GithubApiError, GithubError, GithubParseError, GithubVerificationError
from .parse import (
    CommentReply,
    Delivery,
    PingEvent,
    github_principal,
    parse_github_event,
    read_delivery,
    reply_response,
)
from .render import render_prompt, render_settled_prompt
from .verify import SIGNATURE_HEADER, github_signature, verify_github_signature

__all__ = [
    "MIN_PERMISSIONS",
    "SIGNATURE_HEADER",
    "CollaboratorRole",
    "CommentReply",
    "Delivery",
    "GithubApiError",
    "GithubChannel",
    "GithubClient",
    "GithubError",
    "GithubParseError",
    "GithubVerificationError",
    "PingEvent",
    "address_place",
    "github_address",
    "github_principal",
    "github_signature",
    "parse_github_event",
    "read_delivery",
    "render_prompt",
    "render_settled_prompt",
    "reply_response",
    "verify_github_signature",
]
