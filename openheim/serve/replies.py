"""The plain-HTTP side of `openheim serve`: the page, JSON replies and errors, and strict header reading.

``websockets`` (imported only when serving) builds the replies; every reply is closed after it is sent and
never cached.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from functools import lru_cache
from http import HTTPStatus
from importlib.resources import files
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from websockets.datastructures import Headers
    from websockets.http11 import Response


@lru_cache(maxsize=1)
def page() -> bytes:
    return files("openheim.serve").joinpath("web/index.html").read_bytes()


PAGE_POLICY = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "connect-src 'self' ws: wss:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def response(
    status: int, body: bytes, content_type: str, extra: Sequence[tuple[str, str]] = (), head: bool = False
) -> Response:
    from websockets.datastructures import Headers
    from websockets.http11 import Response

    headers = Headers(
        [
            ("Content-Type", content_type),
            ("Content-Length", str(len(body))),
            ("Cache-Control", "no-store"),
            ("X-Content-Type-Options", "nosniff"),
            ("Connection", "close"),
            *extra,
        ]
    )
    return Response(status, HTTPStatus(status).phrase, headers, b"" if head else body)


def json_response(
    status: int,
    payload: Any,
    extra: Sequence[tuple[str, str]] = (),
    head: bool = False,
) -> Response:
    body = json.dumps(payload, ensure_ascii=False).encode("utf-8")
    return response(status, body, "application/json", extra, head)


def error(status: int, message: str, extra: Sequence[tuple[str, str]] = ()) -> Response:
    return json_response(status, {"error": message}, extra)


class BadRequest(Exception):
    """A request we will not interpret (e.g. two Host headers)."""


def single(headers: Headers, name: str) -> str | None:
    """A header that must appear at most once."""
    values = headers.get_all(name)
    if len(values) > 1:
        raise BadRequest(f"more than one {name} header")
    return values[0] if values else None


def library_logger() -> logging.Logger:
    """The websockets library's logger, never at debug: its debug lines carry request headers (the token)."""
    logger = logging.getLogger("openheim.serve.websockets")
    logger.setLevel(max(logging.INFO, logging.getLogger().getEffectiveLevel()))
    return logger
