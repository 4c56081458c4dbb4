"""Who is calling the REST API: an API key's principal, or the local operator on loopback."""

from __future__ import annotations

import hmac
import ipaddress

from flask import current_app, request

from engine.protocol import Principal, api_key_principal, operator_principal

from .errors import ApiError

LOCAL_OPERATOR = operator_principal("local")


def is_loopback(address: str | None) -> bool:
    try:
        return address is not None and ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def current_principal() -> Principal:
    """Bearer key -> its principal; with no keys configured, loopback clients act as the local operator."""
    keys: dict[str, str] = current_app.config["HITL_SETTINGS"].api_keys
    if not keys:
        if not is_loopback(request.remote_addr):
            raise ApiError(403, "loopback_only", "with no HITL_API_KEYS set, only local clients are served")
        return LOCAL_OPERATOR
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() == "bearer" and given:
        for key, principal_id in keys.items():
            if hmac.compare_digest(key.encode(), given.strip().encode()):
                return api_key_principal(principal_id)
    raise ApiError(401, "unauthorized", "a valid `Authorization: Bearer <key>` header is required")
