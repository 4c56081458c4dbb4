"""`X-Hub-Signature-256`: `sha256=` + HMAC-SHA256(webhook secret, raw body), compared in constant time."""

from __future__ import annotations

import hashlib
import hmac

from .errors import GithubVerificationError

SIGNATURE_HEADER = "X-Hub-Signature-256"


def github_signature(secret: str, body: bytes) -> str:
    """The header value GitHub sends for `body` (the exact bytes received, before any parsing)."""
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def verify_github_signature(secret: str, body: bytes, signature: str | None) -> None:
    """Raise GithubVerificationError unless `signature` signs `body` with `secret`."""
    if not signature:
        raise GithubVerificationError(f"the {SIGNATURE_HEADER} header is missing")
    expected = github_signature(secret, body).encode()
    if not hmac.compare_digest(expected, signature.strip().encode("utf-8", "replace")):
        raise GithubVerificationError(f"the {SIGNATURE_HEADER} signature does not match the body")
