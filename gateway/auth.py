"""Who is calling the REST API: an API key's principal and role, or the local operator on loopback."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from flask import current_app, request

from engine.protocol import Principal, Role, operator_principal

from .apikeys import find_key
from .errors import ApiError


@dataclass(frozen=True)
class Caller:
    """Who calls, and what their key may do (docs/access.md)."""

    principal: Principal
    role: Role

    @property
    def seen_by(self) -> Principal | None:
        """Whose view the engine's reads take (engine/store/access.py): None, everything, for an operator."""
        return None if self.role == "operator" else self.principal

    def require_operator(self, message: str) -> None:
        """403 not_permitted, saying `message`, unless this is an operator."""
        self.require(("operator",), message)

    def require(self, roles: tuple[Role, ...], message: str) -> None:
        """403 not_permitted, saying `message`, unless the caller's role is one of `roles`."""
        if self.role not in roles:
            raise ApiError(403, "not_permitted", message, {"role": self.role})


LOCAL_OPERATOR = Caller(operator_principal("local"), "operator")
PROXY_HEADERS = {"forwarded", "x-real-ip", "via", "x-client-ip", "true-client-ip", "cf-connecting-ip"}
"""Headers a reverse proxy, a CDN or a load balancer adds (with any `X-Forwarded-*`), lower case: a client
behind one is not local, though the proxy connects from loopback."""


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


def proxy_header() -> str | None:
    """The first header of the request that a proxy adds (PROXY_HEADERS, X-Forwarded-*), if any."""
    for name, _ in request.headers.items():
        if name.lower().startswith("x-forwarded-") or name.lower() in PROXY_HEADERS:
            return name
    return None


def local_operator() -> Caller:
    """Loopback clients, without keys, act as the local operator; but a client a proxy on this host passes on
    connects from loopback too (a proxy's header says so), and a browser can be made to call loopback by a page
    whose name re-resolves to 127.0.0.1 (its name is then the Host), or by a form another site posts (its
    Origin says so), so such requests are refused, as Jupyter and Vite refuse them."""
    if not is_loopback(request.remote_addr):
        raise ApiError(403, "loopback_only", "with no HITL_API_KEYS set, only local clients are served")
    header = proxy_header()
    if header is not None:
        raise ApiError(403, "loopback_only", "with no HITL_API_KEYS set, only local clients are served, not ones "
                       f"a proxy forwards (the request has {header}): set HITL_API_KEYS to serve through a proxy",
                       {"header": header})
    listed = [name.lower() for name in current_app.config["HITL_SETTINGS"].allowed_hosts]
    if not is_local_name(request.host, listed):
        raise ApiError(403, "host_not_allowed", "with no HITL_API_KEYS set, the Host must be localhost, an IP "
                       "address or a name in HITL_ALLOWED_HOSTS", {"host": request.host})
    origin = request.headers.get("Origin")
    if origin is not None and urlsplit(origin).netloc.lower() != request.host.lower():
        raise ApiError(403, "origin_not_allowed", "with no HITL_API_KEYS set, only pages of this gateway's own "
                       "origin may call it", {"origin": origin})
    return LOCAL_OPERATOR


def current_caller() -> Caller:
    """Bearer key -> its principal and role; with no keys configured, loopback clients act as the local
    operator."""
    keys = current_app.config["HITL_SETTINGS"].all_api_keys
    if not keys:
        return local_operator()
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    found = find_key(keys, given.strip()) if scheme.lower() == "bearer" and given.strip() else None
    if found is None:
        raise ApiError(401, "unauthorized", "a valid `Authorization: Bearer <key>` header is required")
    return Caller(found.principal, found.role)
