"""Who may talk to `openheim serve`: the token, the Host header, the Origin header and CORS (pure functions)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from urllib.parse import parse_qs, urlsplit

from openheim.config.loopback import is_loopback


def host_name(host_header: str | None) -> str:
    """The name part of a Host header ("127.0.0.1:1217" → "127.0.0.1", "[::1]:80" → "::1")."""
    value = (host_header or "").strip()
    if value.startswith("["):
        return value[1 : value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def host_ok(host_header: str | None) -> bool:
    """Without a token only loopback Host names are served, so a DNS-rebinding page cannot reach us."""
    return bool(host_header) and is_loopback(host_name(host_header))


def given_token(headers: Mapping[str, str | None], query: str) -> str | None:
    """The token a request carries: ``Authorization: Bearer T``, else ``?token=T``."""
    auth = headers.get("Authorization") or ""
    scheme, _, value = auth.strip().partition(" ")
    if scheme.lower() == "bearer" and value.strip():
        return value.strip()
    values = parse_qs(query, keep_blank_values=True).get("token")
    return values[0] if values else None


def token_ok(expected: str | None, headers: Mapping[str, str | None], query: str) -> bool:
    """True when no token is configured, else when the request's token matches (constant time)."""
    if expected is None:
        return True
    given = given_token(headers, query)
    return given is not None and hmac.compare_digest(given.encode("utf-8", "replace"), expected.encode("utf-8"))


def same_origin(origin: str, host_header: str | None) -> bool:
    parts = urlsplit(origin)
    return (
        parts.scheme in ("http", "https")
        and host_header is not None
        and bool(host_header)
        and parts.netloc.lower() == host_header.lower()
    )


def origin_allowed(origin: str | None, host_header: str | None, allowed: Iterable[str]) -> bool:
    """A WebSocket upgrade from a browser page: only our own page or a configured origin (no Origin: not a browser)."""
    if origin is None:
        return True
    return same_origin(origin, host_header) or origin.rstrip("/") in allowed


def cors_headers(origin: str | None, allowed: Iterable[str]) -> list[tuple[str, str]]:
    """The CORS response headers for ``origin``: none unless it is configured."""
    if origin is None or origin.rstrip("/") not in allowed:
        return []
    return [("Access-Control-Allow-Origin", origin), ("Vary", "Origin")]


def preflight_headers(origin: str | None, allowed: Iterable[str]) -> list[tuple[str, str]]:
    headers = cors_headers(origin, allowed)
    if headers:
        headers += [
            ("Access-Control-Allow-Methods", "GET, HEAD, OPTIONS"),
            ("Access-Control-Allow-Headers", "Authorization"),
            ("Access-Control-Max-Age", "600"),
        ]
    return headers
