"""Server-sent events from a byte stream: sseclient-py parses each event; ``EventStream`` frames them.

sseclient-py's own framing copies the growing event for every line it appends (superlinear on a huge
event) and needs a blank line between events. ``EventStream._read`` replaces it: linear time, capped
line and event sizes, comments dropped early, and a fallback for servers that write ``data:`` lines
back to back with no blank line (each complete JSON payload then ends its event, while a genuinely
multi-line ``data:`` event, whose first line is not complete JSON, is still joined as the spec says).
"""
from __future__ import annotations

import json
import logging
import time
from collections.abc import Iterable, Iterator
from itertools import chain
from typing import Any

import sseclient

from openheim.errors import ParseError, TransportError

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1 << 20
MAX_EVENT_BYTES = 16 << 20
MAX_EVENT_LINES = 256  # data lines of one event; sseclient joins them in time lines x size
HEAD_BYTES = 120
_CR, _LF, _COLON, _D, _E = 13, 10, 58, 100, 101  # b"\r", b"\n", b":", b"d", b"e"
_END = (b"\n",)  # ends a last line that has no line break


class EventStream(sseclient.SSEClient):
    """sseclient-py over an iterator of byte chunks, framed by ``_read``.

    Once iterated to the end: ``head`` holds the body's first bytes, ``data_lines`` counts ``data:``
    lines and ``other_lines`` the lines that are neither ``data:``, ``event:``, comments nor blank (the
    lines of an HTML page or a plain-text body are such lines).
    """

    def __init__(self, chunks: Iterable[bytes], max_line: int = MAX_LINE_BYTES,
                 max_event: int = MAX_EVENT_BYTES, idle_secs: float | None = None) -> None:
        super().__init__(iter(chunks))
        self._chunks = chunks
        self.max_line, self.max_event = max_line, max_event
        self._idle = IdleWatch(idle_secs)
        self.head = b""
        self.data_lines = 0
        self.other_lines = 0

    def _read(self) -> Iterator[bytes]:
        """Each event's lines as one bytes object (what ``events()`` parses)."""
        event: list[bytes] = []
        size = data = data_lines = other_lines = 0
        carry: list[bytes] = []  # pieces of a line not yet terminated
        carried = 0
        max_event = self.max_event
        for chunk in chain(self._chunks, _END):
            if not chunk:
                continue
            if len(self.head) < HEAD_BYTES:
                self.head += chunk[:HEAD_BYTES - len(self.head)]
            if carry:
                if chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0:
                    carry.append(chunk)
                    carried += len(chunk)
                    self._check_line(carried)
                    continue
                carry.append(chunk)
                chunk = b"".join(carry)
                carry, carried = [], 0
            lines = chunk.splitlines(True)
            last = lines[-1]
            if last[-1] != _LF:  # unterminated, or a CR that may be half of a CRLF
                carry.append(lines.pop())
                carried = len(last)
                self._check_line(carried)
            for line in lines:
                first = line[0]
                if first in (_LF, _CR):  # a blank line ends the event
                    if event:
                        ready = event[0] if len(event) == 1 else b"".join(event)
                        yield ready if ready.isascii() else _utf8(ready)
                        event, size, data = [], 0, 0
                    continue
                if first == _COLON:
                    self._idle.comment()
                    continue
                self._idle.content()
                if first == _D and line.startswith(b"data:"):
                    data_lines += 1
                    if data == 1 and _complete(event):  # back-to-back payloads, no blank line between
                        yield _utf8(b"".join(event))
                        event, size, data = [], 0, 0
                    data += 1
                    if data > MAX_EVENT_LINES:
                        raise ParseError(f"a stream event has more than {MAX_EVENT_LINES} data lines; "
                                         "the provider's stream is malformed")
                elif first == _E and line.startswith(b"event:"):
                    if data == 1 and _complete(event):
                        yield _utf8(b"".join(event))
                        event, size, data = [], 0, 0
                else:
                    other_lines += 1
                event.append(line)
                size += len(line)
                if size > max_event:
                    raise ParseError(f"a stream event is larger than {max_event >> 20} MiB; "
                                     "openheim does not read events that big")
        self.data_lines, self.other_lines = data_lines, other_lines
        if carry:
            event.append(b"".join(carry))
        if event:
            yield _utf8(b"".join(event))

    def _check_line(self, length: int) -> None:
        if length > self.max_line:
            raise ParseError(f"stream line longer than {self.max_line} bytes")

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """(event name, data) for every dispatched event; comments and data-less events are skipped."""
        for event in self.events():
            yield event.event, event.data


class IdleWatch:
    """``timeout_secs`` counts time without content: a stream of only comments (``: keepalive``) keeps the
    socket busy, so its read timeout never fires; this does, after ``idle_secs`` with nothing but comments."""

    def __init__(self, idle_secs: float | None) -> None:
        self.idle_secs = idle_secs
        self.since = time.monotonic()

    def content(self) -> None:
        if self.idle_secs is not None:
            self.since = time.monotonic()

    def comment(self) -> None:
        if self.idle_secs is not None and time.monotonic() - self.since > self.idle_secs:
            raise TransportError(f"the provider sent only keep-alive comments for {self.idle_secs:g} s "
                                 "(timeout_secs); it stopped responding")


def _complete(event: list[bytes]) -> bool:
    """Whether the event's single ``data:`` line holds a whole payload (JSON or ``[DONE]``) by itself."""
    for line in event:
        if line[:5] == b"data:":
            value = line[5:].strip()
            if value == b"[DONE]":
                return True
            try:
                json.loads(value)
            except (ValueError, RecursionError):
                return False
            return True
    return False


def _utf8(event: bytes) -> bytes:
    """The event as valid UTF-8: invalid bytes become U+FFFD (sseclient would raise on them)."""
    try:
        event.decode("utf-8")
    except UnicodeDecodeError:
        return event.decode("utf-8", "replace").encode("utf-8")
    return event


def iter_sse(chunks: Iterable[bytes]) -> Iterator[tuple[str, str]]:
    """(event name, data) for every dispatched event of a byte stream."""
    return iter(EventStream(chunks))


_decoder = json.JSONDecoder()
_scan, _decode = _decoder.scan_once, _decoder.decode  # type: ignore[attr-defined]  # set in __init__, untyped


def parse_json(data: str) -> Any:
    """The JSON value of an SSE payload, or None (with a warning) when it is not JSON."""
    try:
        if data[:1] == "{":  # the usual payload: scan it without decode()'s two whitespace regexes
            value, end = _scan(data, 0)
            if end == len(data) or not data[end:].strip():
                return value
        return _decode(data)
    except (ValueError, RecursionError, StopIteration):
        log.warning("skipping a stream payload that is not valid JSON: %s", data[:200])
        return None
