"""Server-sent events from a byte stream (sseclient-py does the framing; bytes in, never text)."""
from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Iterator
from typing import Any

import sseclient

from openheim.errors import ParseError

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1048576


def guard_line_length(chunks: Iterable[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[bytes]:
    """Pass ``chunks`` through, failing once an unterminated line grows past ``limit`` bytes."""
    pending = 0
    for chunk in chunks:
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        pending = pending + len(chunk) if end < 0 else len(chunk) - end - 1
        if pending > limit:
            raise ParseError(f"stream line longer than {limit} bytes")
        yield chunk


def iter_sse(chunks: Iterable[bytes]) -> Iterator[tuple[str, str]]:
    """(event name, data) for every dispatched event; comments and data-less events are skipped."""
    for event in sseclient.SSEClient(guard_line_length(chunks)).events():
        yield event.event, event.data


_decode = json.JSONDecoder().decode


def parse_json(data: str) -> Any:
    """The JSON value of an SSE payload, or None (with a warning) when it is not JSON."""
    try:
        return _decode(data)
    except ValueError:
        log.warning("skipping a stream payload that is not valid JSON: %s", data[:200])
        return None
