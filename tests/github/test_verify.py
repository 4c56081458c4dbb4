"""`X-Hub-Signature-256`: HMAC-SHA256 of the raw body, pinned by GitHub's documented vector."""

from __future__ import annotations

import pytest

from adapters.github import GithubVerificationError, github_signature, verify_github_signature
from tests.support.signing import github_signature as signed_by_the_tests

VECTOR_SECRET = "It's a Secret to Everybody"
VECTOR_BODY = b"Hello, World!"
VECTOR_SIGNATURE = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"


def test_the_documented_vector() -> None:
    assert github_signature(VECTOR_SECRET, VECTOR_BODY) == VECTOR_SIGNATURE
    assert signed_by_the_tests(VECTOR_SECRET, VECTOR_BODY) == VECTOR_SIGNATURE
    verify_github_signature(VECTOR_SECRET, VECTOR_BODY, VECTOR_SIGNATURE)


@pytest.mark.parametrize("secret, body, signature", [
    ("another secret", VECTOR_BODY, VECTOR_SIGNATURE),
    (VECTOR_SECRET, b"Hello, World?", VECTOR_SIGNATURE),
    (VECTOR_SECRET, VECTOR_BODY, None),
    (VECTOR_SECRET, VECTOR_BODY, ""),
    (VECTOR_SECRET, VECTOR_BODY, VECTOR_SIGNATURE.removeprefix("sha256=")),
    (VECTOR_SECRET, VECTOR_BODY, VECTOR_SIGNATURE[:-1]),
    (VECTOR_SECRET, VECTOR_BODY, "sha1=01dc10d0c83e72ed246219cdd91669667fe2ca59"),
    (VECTOR_SECRET, VECTOR_BODY, VECTOR_SIGNATURE[:-1] + "é"),
], ids=["wrong secret", "tampered body", "missing", "empty", "no prefix", "truncated", "sha1", "not ascii"])
def test_anything_else_is_refused(secret: str, body: bytes, signature: str | None) -> None:
    with pytest.raises(GithubVerificationError):
        verify_github_signature(secret, body, signature)
