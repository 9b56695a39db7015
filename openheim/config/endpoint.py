"""A provider's ``api_base`` joined with an endpoint path, so that a query it carries (``?key=…``,
``?api-version=…``) stays a query instead of swallowing the path."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def join(api_base: str, path: str) -> str:
    """``api_base`` with ``path`` (which may carry its own query, e.g. ``?alt=sse``) appended to its path,
    the base's query kept after it: ``https://h/v1?key=k`` + ``/chat/completions`` →
    ``https://h/v1/chat/completions?key=k``."""
    base = urlsplit(api_base)
    route, _, extra = path.partition("?")
    query = "&".join(q for q in (base.query, extra) if q)
    return urlunsplit((base.scheme, base.netloc, base.path.rstrip("/") + route, query, ""))
