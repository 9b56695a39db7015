"""Reading a 2xx model reply into a Choice, the same way on every wire.

The body is an event stream, or a whole JSON reply in its place (some servers answer a streaming
request that way). A body that is neither, and a payload of the wrong shape, are provider errors
reported once in one line (never retried); an unparsable stream line is skipped with a warning.
"""

from __future__ import annotations

import json
import logging
from itertools import chain
from typing import TYPE_CHECKING, Any, Protocol

from openheim.config.secrecy import host_of, redact
from openheim.core.llm.http import cut_by_us, read_body, read_chunks
from openheim.core.llm.http_errors import unreadable_reply
from openheim.core.llm.shape import mismatch
from openheim.core.llm.sse import MAX_EVENT_BYTES, EventStream, parse_json
from openheim.core.spend import counted
from openheim.core.spend import estimate as estimate_usage
from openheim.errors import ApiError, Cancelled

if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator

    import requests

    from openheim.core.llm.base import Chunk, OnChunk
    from openheim.core.models import Choice

log = logging.getLogger(__name__)

# what a parser raises on a payload of the wrong shape ("choices": "x", a tool name given as a list)
SHAPE_ERRORS = (AttributeError, TypeError, ValueError, KeyError, IndexError, RecursionError)


class StreamParser(Protocol):
    """One wire's accumulator: stream payloads in, shown chunks out, the assembled Choice at the end."""

    wire: str  # the API's name, for messages
    shape: Any  # a shape.py schema of its payloads (and whole replies)
    done: bool  # the wire's end marker arrived: stop reading

    def feed(self, payload: dict[str, Any]) -> list[Chunk]: ...

    def feed_done(self) -> None: ...

    def finish(self) -> Choice: ...

    def whole(self, reply: Any) -> list[dict[str, Any]]: ...


def read_reply(
    resp: requests.Response, parser: StreamParser, on_chunk: OnChunk, url: str, estimate: bool = False
) -> Choice:
    """Feed ``resp``'s body to ``parser``, calling ``on_chunk`` for every fragment to show; the Choice, its
    token counts clamped at 0. ``estimate`` (a cost budget is set): a reply without usage gets an estimate
    from the bytes sent and received (core/spend.py)."""
    received = [0]
    chunks = _counting(read_chunks(resp), received) if estimate else read_chunks(resp)
    choice = _read(resp, chunks, parser, on_chunk, url)
    if choice.usage is not None:
        choice.usage = counted(choice.usage)
    elif estimate:
        body = getattr(getattr(resp, "request", None), "body", None)
        choice.usage = estimate_usage(len(body) if isinstance(body, (bytes, str)) else 0, received[0])
    return choice


def _counting(chunks: Iterator[bytes], received: list[int]) -> Iterator[bytes]:
    for chunk in chunks:
        received[0] += len(chunk)
        yield chunk


def _read(
    resp: requests.Response, chunks: Iterator[bytes], parser: StreamParser, on_chunk: OnChunk, url: str
) -> Choice:
    content_type = resp.headers.get("content-type", "")
    first = next(chunks, b"")
    start = first[:64].lstrip()[:1]
    if start == b"<":
        html = b"<html" in first[:1024].lower() or b"<!doctype html" in first[:1024].lower()
        raise unreadable_reply(url, content_type, first, "an HTML page" if html else "markup, not an event stream")
    if start in (b"{", b"[") or content_type.lower().startswith("application/json"):
        return _whole(read_body(chain((first,), chunks), MAX_EVENT_BYTES, url), parser, on_chunk, url, content_type)
    return _stream(chain((first,), chunks), parser, on_chunk, url, content_type, resp)


def _stream(
    chunks: Iterable[bytes], parser: StreamParser, on_chunk: OnChunk, url: str, content_type: str, resp: object = None
) -> Choice:
    # http sets how long a stream may go without content (timeout_secs); keep-alive comments do not count
    stream = EventStream(chunks, idle_secs=getattr(resp, "openheim_idle_secs", None))
    parsed = 0
    for _event, data in stream:
        if data[:6] == "[DONE]":
            parser.feed_done()
            break
        payload = parse_json(data, warn=False)
        if payload.__class__ is not dict:
            _skip(data, payload, resp)
            continue
        parsed += 1
        try:
            shown = parser.feed(payload)
        except SHAPE_ERRORS as e:
            raise malformed(parser, payload, e, url) from None
        for chunk in shown:
            on_chunk(chunk)
        if parser.done:
            break
    else:
        if cut_by_us(resp):  # the stream ended because a cancel shut it down: no verdict on what it held
            raise Cancelled()
        if not parsed and (stream.data_lines or stream.other_lines):
            why = "no JSON event in it" if stream.data_lines else "not an event stream"
            raise unreadable_reply(url, content_type, stream.head, why)
    return _finish(parser, url)


def _skip(data: str, payload: Any, resp: object) -> None:
    """Say why a payload is skipped, unless our own cancel cut it short (then the reading ends here)."""
    if cut_by_us(resp):
        raise Cancelled()
    what = "not valid JSON" if payload is None else "not a JSON object"
    log.warning("skipping a stream payload that is %s: %s", what, data[:200])


def _whole(data: bytes, parser: StreamParser, on_chunk: OnChunk, url: str, content_type: str) -> Choice:
    """A whole (non-streamed) JSON reply: fed to the parser as the stream payloads it stands for."""
    try:
        reply = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):
        if data.lstrip()[:5] in (b"data:", b"event"):  # an event stream labelled as JSON
            return _stream((data,), parser, on_chunk, url, content_type)
        raise unreadable_reply(url, content_type, data, "not valid JSON") from None
    shown: list[Chunk] = []
    try:
        for payload in parser.whole(reply):
            shown += parser.feed(payload)
    except SHAPE_ERRORS as e:
        raise malformed(parser, reply, e, url) from None
    parser.feed_done()
    for chunk in shown:
        on_chunk(chunk)
    return _finish(parser, url)


def _finish(parser: StreamParser, url: str) -> Choice:
    try:
        return parser.finish()
    except SHAPE_ERRORS as e:
        raise malformed(parser, None, e, url) from None


def malformed(parser: StreamParser, payload: Any, error: BaseException, url: str) -> ApiError:
    """The one-line, never retried error for valid JSON of the wrong shape, saying what was wrong."""
    what = (mismatch(payload, parser.shape) if payload is not None else None) or str(error) or type(error).__name__
    return ApiError(
        f"{host_of(url)} sent a malformed {parser.wire} reply: {redact(what)[:300]}; check api_base "
        "and the provider's kind",
        retryable=False,
    )
