"""API keys: `HITL_API_KEYS` and `HITL_API_KEYS_FILE` entries, and the key a caller presents (docs/access.md).

An entry is `key=principalId` or `key=principalId:role`, split at the last `=` (a base64 key may end in `=`
padding) and, for the role, at the last `:` only when what follows is a role name (a principal id may hold
`:`, as `slack:T1:U1` does). A key may be given as `sha256:<hex>`, the SHA-256 of the key, so the file (or
the variable) holds no secret. Keys are kept as their SHA-256 only, and every one is compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from engine.protocol import ROLES, Principal, Role, api_key_principal

MIN_KEY_LENGTH = 24
"""The shortest key accepted (24 characters of `openssl rand -base64 18`; 144 bits)."""
DIGEST_PREFIX = "sha256:"
SHA256_HEX = re.compile(r"[0-9a-fA-F]{64}")
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
SHAPE = "entries look like key=principalId or key=principalId:role (role: operator, user or agent)"


@dataclass(frozen=True)
class ApiKey:
    """One entry: the key's SHA-256, who it acts as, and where it was given (for errors, never the key)."""

    digest: bytes
    principal_id: str
    role: Role
    where: str = field(compare=False)

    @property
    def principal(self) -> Principal:
        return api_key_principal(self.principal_id, self.role)


def split_role(who: str) -> tuple[str, Role]:
    """`alice:operator` -> (alice, operator); `slack:T1:U1` -> (slack:T1:U1, user): the part after the last
    `:` is a role only when it names one (so a principal id ending in `:agent` is written `...:agent:user`)."""
    head, sep, tail = who.rpartition(":")
    if sep and tail.strip().lower() in ROLES:
        return head.strip(), cast(Role, tail.strip().lower())
    return who, "user"


def api_key(key: str, who: str, where: str) -> ApiKey:
    """An entry's key (or `sha256:<hex>`) and principal (with its role, if any); ValueError naming `where` and
    what is wrong, never the key."""
    key, (principal_id, role) = key.strip(), split_role(who.strip())
    if not key or not principal_id:
        raise ValueError(f"{SHAPE}, and {where} does not")
    if CONTROL.search(principal_id):
        raise ValueError(f"the principal id of {where} holds a control character")
    if key.startswith(DIGEST_PREFIX):
        hexdigest = key.removeprefix(DIGEST_PREFIX)
        if not SHA256_HEX.fullmatch(hexdigest):
            raise ValueError(f"the key of {where} starts with {DIGEST_PREFIX} but is not 64 hex digits after it")
        return ApiKey(bytes.fromhex(hexdigest), principal_id, role, where)
    if len(key) < MIN_KEY_LENGTH:
        raise ValueError(f"the key of {where} is shorter than {MIN_KEY_LENGTH} characters (make one with "
                         "`openssl rand -base64 24`)")
    return ApiKey(hashlib.sha256(key.encode()).digest(), principal_id, role, where)


def parse_entry(entry: str, where: str) -> ApiKey:
    key, sep, who = entry.rpartition("=")
    if not sep:
        raise ValueError(f"{SHAPE}, and {where} does not")
    return api_key(key, who, where)


def parse_keys(value: str) -> list[ApiKey]:
    """`HITL_API_KEYS`: comma-separated entries (blank ones skipped), numbered from 1 in errors."""
    entries = filter(None, (part.strip() for part in value.split(",")))
    return [parse_entry(entry, f"entry {number}") for number, entry in enumerate(entries, 1)]


def parse_key_file(path: str) -> list[ApiKey]:
    """`HITL_API_KEYS_FILE`: one entry a line; blank lines and lines starting with `#` are skipped."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = getattr(exc, "strerror", None) or "not UTF-8 text"
        raise ValueError(f"the file cannot be read ({why})") from None
    return [parse_entry(line.strip(), f"line {number}")
            for number, line in enumerate(text.splitlines(), 1)
            if line.strip() and not line.lstrip().startswith("#")]


def check_distinct(sources: dict[str, list[ApiKey]]) -> None:
    """ValueError when two entries hold the same key (which principal it acts as would depend on order).
    `sources`: each variable's entries, by its name."""
    seen: dict[bytes, str] = {}
    for name, keys in sources.items():
        for key in keys:
            where = f"{name} {key.where}"
            if key.digest in seen:
                raise ValueError(f"{where} holds the same key as {seen[key.digest]}")
            seen[key.digest] = where


def find_key(keys: Sequence[ApiKey], given: str) -> ApiKey | None:
    """The entry whose key is `given`: its SHA-256 compared with every entry's in constant time (all of them,
    so how long it takes does not say which matched)."""
    digest = hashlib.sha256(given.encode()).digest()
    found = None
    for key in keys:
        if hmac.compare_digest(key.digest, digest):
            found = key
    return found
