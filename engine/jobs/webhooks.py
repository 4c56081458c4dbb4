"""Outgoing webhooks (an external request's callback): signed per Standard Webhooks, sent only where they may go.

Signing (https://www.standardwebhooks.com): the secret is `whsec_<base64>`; each message has an id (`webhook-id`,
the same on every attempt: a receiver deduplicates on it), a timestamp in seconds (`webhook-timestamp`) and the
signature `v1,<base64 of HMAC-SHA256(secret, "<id>.<timestamp>.<body>")>` (`webhook-signature`).

Where: an http(s) URL whose host is in HITL_CALLBACK_ALLOWED_HOSTS when that is set, and never a link-local or
cloud-metadata address (169.254.0.0/16, fe80::/10, fd00:ec2::254, metadata.google.internal), checked when the URL
is given and again when it is called: the name is resolved then, every address it has is checked, and the
connection goes to the address checked, so a name that resolves elsewhere by then (DNS rebinding) gains nothing.
Redirects are not followed (a 3xx is a failed attempt).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import ipaddress
import re
import socket
from collections.abc import Collection
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from engine import defaults

SECRET_PREFIX = "whsec_"
FORBIDDEN_NETWORKS = (ipaddress.ip_network("169.254.0.0/16"), ipaddress.ip_network("fe80::/10"),
                      ipaddress.ip_network("fd00:ec2::254/128"))
"""Link-local addresses (169.254.169.254 is AWS's, GCP's and Azure's metadata service) and AWS's IPv6 one."""
FORBIDDEN_NAMES = frozenset({"metadata.google.internal", "metadata.goog"})


class WebhookRefused(Exception):
    """The URL may not be called (the message says why); nothing was sent."""


class WebhookFailed(Exception):
    """The attempt failed (the message says how): another may succeed."""


def parse_secret(secret: str) -> bytes:
    """The key of a `whsec_<base64>` secret; ValueError when it is not one."""
    if not secret.startswith(SECRET_PREFIX):
        raise ValueError(f"a callback secret starts with {SECRET_PREFIX} (then base64)")
    try:
        key = base64.b64decode(secret.removeprefix(SECRET_PREFIX), validate=True)
    except binascii.Error:
        raise ValueError(f"a callback secret is {SECRET_PREFIX} followed by base64") from None
    if len(key) < 16:
        raise ValueError("a callback secret holds at least 16 bytes (make one with: echo whsec_$(openssl rand "
                         "-base64 32))")
    return key


def signature(key: bytes, message_id: str, timestamp: int, body: bytes) -> str:
    """The `webhook-signature` header of a message."""
    digest = hmac.new(key, f"{message_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def forbidden(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in FORBIDDEN_NETWORKS)


def check_url(url: str, allowed_hosts: Collection[str]) -> str:
    """The URL's host, lower-cased, if the URL may be called; else WebhookRefused saying why."""
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").lower().rstrip(".")
        parts.port  # noqa: B018 - a port that is no number raises here
    except ValueError:
        raise WebhookRefused("it is not a URL") from None
    if parts.scheme not in ("http", "https") or not host:
        raise WebhookRefused("it must be an http:// or https:// URL with a host")
    if allowed_hosts and host not in allowed_hosts:
        raise WebhookRefused(f"its host {host} is not in HITL_CALLBACK_ALLOWED_HOSTS")
    if host in FORBIDDEN_NAMES:
        raise WebhookRefused(f"{host} is a cloud metadata service")
    try:
        literal = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return host
    if forbidden(literal):
        raise WebhookRefused(f"{literal} is a link-local or cloud metadata address")
    return host


def resolve(host: str, port: int) -> str:
    """The address to connect to for `host`: every address it resolves to must be allowed (WebhookRefused)."""
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise WebhookRefused(f"{host} does not resolve ({exc.strerror})") from None
    addresses = [ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found]
    for address in addresses:
        if forbidden(address):
            raise WebhookRefused(f"{host} resolves to {address}, a link-local or cloud metadata address")
    return str(addresses[0])


class _CheckedHTTPConnection(HTTPConnection):
    def _new_conn(self) -> socket.socket:
        self._dns_host = resolve(self._dns_host, self.port)  # connect to the address checked, nothing else
        return super()._new_conn()


class _CheckedHTTPSConnection(HTTPSConnection):  # the certificate is checked against the name, as usual
    def _new_conn(self) -> socket.socket:
        self._dns_host = resolve(self._dns_host, self.port)
        return super()._new_conn()


class _CheckedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _CheckedHTTPConnection


class _CheckedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _CheckedHTTPSConnection


class _CheckedAdapter(HTTPAdapter):
    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = {"http": _CheckedHTTPPool, "https": _CheckedHTTPSPool}


def post_signed(url: str, body: bytes, *, key: bytes, message_id: str, timestamp: int,
                allowed_hosts: Collection[str], timeout: float = defaults.CALLBACK_TIMEOUT_SECONDS) -> None:
    """POST a signed JSON body. Returns on a 2xx; raises WebhookRefused (not sent), or WebhookFailed naming what
    the receiver answered or what went wrong on the way."""
    check_url(url, allowed_hosts)
    headers = {"content-type": "application/json", "user-agent": "hitl-gateway", "webhook-id": message_id,
               "webhook-timestamp": str(timestamp), "webhook-signature": signature(key, message_id, timestamp, body)}
    with requests.Session() as session:
        session.trust_env = False  # no proxy from the environment: the connection goes where it was checked to
        session.mount("http://", _CheckedAdapter())
        session.mount("https://", _CheckedAdapter())
        try:
            response = session.post(url, data=body, headers=headers, timeout=timeout, allow_redirects=False)
        except requests.Timeout:
            raise WebhookFailed(f"no answer within {timeout:g} s") from None
        except requests.RequestException as exc:
            raise WebhookFailed(f"could not reach it: {why(exc)}") from None
    if not 200 <= response.status_code < 300:
        raise WebhookFailed(f"it answered HTTP {response.status_code}")


ERRNO = re.compile(r"\[Errno -?\d+\] ([^'\")]+)")


def why(exc: Exception) -> str:
    """What the operating system said (`Connection refused`), else the exception's kind."""
    found = ERRNO.search(str(exc))
    return found[1].strip() if found else type(exc).__name__
