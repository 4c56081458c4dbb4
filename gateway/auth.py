"""Who is calling the REST API: an API key's principal, or the local operator on loopback."""

from __future__ import annotations

import hmac
import ipaddress
from urllib.parse import urlsplit

from flask import current_app, request

from engine.protocol import Principal, api_key_principal, operator_principal

from .errors import ApiError

LOCAL_OPERATOR = operator_principal("local")


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def is_local_name(netloc: str, listed: list[str]) -> bool:
    """Whether a Host (`name[:port]`) is one no DNS rebinding can give a web page: localhost, a name under
    .localhost, an IP address, or one the operator lists (HITL_ALLOWED_HOSTS). Any port."""
    try:
        name = urlsplit(f"//{netloc}").hostname or ""
    except ValueError:
        return False
    if name == "localhost" or name.endswith(".localhost") or name in listed:
        return True
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def local_operator() -> Principal:
    """Loopback clients, without keys, act as the local operator; but a browser can be made to call loopback by
    a page whose name re-resolves to 127.0.0.1 (its name is then the Host), or by a form another site posts
    (its Origin says so), so such requests are refused, as Jupyter and Vite refuse them."""
    if not is_loopback(request.remote_addr):
        raise ApiError(403, "loopback_only", "with no HITL_API_KEYS set, only local clients are served")
    if "X-Forwarded-For" in request.headers or "Forwarded" in request.headers:  # a proxy on this host passed it on
        raise ApiError(403, "loopback_only", "with no HITL_API_KEYS set, only local clients are served, not ones "
                       "a proxy forwards: set HITL_API_KEYS to serve through a proxy")
    listed = [name.lower() for name in current_app.config["HITL_SETTINGS"].allowed_hosts]
    if not is_local_name(request.host, listed):
        raise ApiError(403, "host_not_allowed", "with no HITL_API_KEYS set, the Host must be localhost, an IP "
                       "address or a name in HITL_ALLOWED_HOSTS", {"host": request.host})
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        raise ApiError(403, "origin_not_allowed", "with no HITL_API_KEYS set, only pages of this gateway's own "
                       "origin may call it", {"origin": origin})
    return LOCAL_OPERATOR


def current_principal() -> Principal:
    """Bearer key -> its principal; with no keys configured, loopback clients act as the local operator."""
    keys: dict[str, str] = current_app.config["HITL_SETTINGS"].api_keys
    if not keys:
        return local_operator()
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and given:
        for key, principal_id in keys.items():
            if hmac.compare_digest(key.encode(), given.strip().encode()):
                return api_key_principal(principal_id)
    raise ApiError(401, "unauthorized", "a valid `Authorization: Bearer <key>` header is required")
