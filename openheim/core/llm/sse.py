"""Server-sent events from a byte stream: ``EventFrames`` frames them, sseclient-py parses each one.

sseclient-py, given raw network chunks, copies the growing event for every line it appends
(superlinear on a huge event) and needs a blank line between events. So it is fed through its public
constructor with what ``EventFrames`` makes of the bytes: exactly one complete event per chunk, each
ending in its blank line. The framing is linear in the input, caps line and event sizes, drops
comments early, and separates events that a server wrote as ``data:`` lines back to back with no
blank line (each complete JSON payload then ends its event, while a genuinely multi-line ``data:``
event, whose first line is not complete JSON, is still joined as the spec says).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Generator, Iterable, Iterator
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


class EventFrames:
    """Complete events from an iterator of byte chunks: one bytes object per event, ending in a blank line.

    Once iterated to the end: ``head`` holds the body's first bytes, ``data_lines`` counts ``data:``
    lines and ``other_lines`` the lines that are neither ``data:``, ``event:``, comments nor blank (the
    lines of an HTML page or a plain-text body are such lines). ``idle_secs`` (timeout_secs) counts time
    without content: a chunk that arrives more than that many seconds after the last one that held anything
    but comments and blank lines is a retryable TransportError (comments keep the socket busy, so its read
    timeout never fires on a server that only sends keep-alives).
    """

    def __init__(
        self,
        chunks: Iterable[bytes],
        max_line: int = MAX_LINE_BYTES,
        max_event: int = MAX_EVENT_BYTES,
        idle_secs: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.chunks = chunks
        self.max_line, self.max_event = max_line, max_event
        self.idle_secs, self.clock = idle_secs or None, clock
        self.head = b""
        self.data_lines = 0
        self.other_lines = 0

    def __iter__(self) -> Iterator[bytes]:
        state = _Assembly()
        idle_secs = self.idle_secs
        last_content = self.clock() if idle_secs else 0.0
        whole_cap = min(self.max_line, self.max_event)
        for chunk in chain(self.chunks, _END):
            if not chunk:
                continue
            if len(self.head) < HEAD_BYTES:
                self.head += chunk[: HEAD_BYTES - len(self.head)]
            if not (state.carry or state.event) and len(chunk) <= whole_cap and _one_event(chunk):  # the usual
                state.data_lines += 1
                if idle_secs:
                    last_content = self._quiet(last_content, True)
                yield chunk if chunk.isascii() else _valid_utf8(chunk)
                continue
            content = yield from self._take(chunk, state)
            if idle_secs:
                last_content = self._quiet(last_content, content)
        self.data_lines, self.other_lines = state.data_lines, state.other_lines
        if state.carry:
            state.event.append(b"".join(state.carry))
        if state.event:
            yield _framed(state.event)

    def _take(self, chunk: bytes, state: _Assembly) -> Generator[bytes, None, bool]:
        """The events ``chunk`` completes; returns whether it held content (not only comments or blank lines)."""
        if state.carry:
            if chunk.find(b"\n") < 0 and chunk.find(b"\r") < 0:  # still inside one long line
                state.carry.append(chunk)
                state.carried += len(chunk)
                self._check_line(state.carried)
                return state.carry[0][:1] != b":"
            state.carry.append(chunk)
            chunk = b"".join(state.carry)
            state.carry, state.carried = [], 0
        lines = chunk.splitlines(True)
        last = lines[-1]
        if last[-1] != _LF:  # unterminated, or a CR that may be half of a CRLF
            state.carry.append(lines.pop())
            state.carried = len(last)
            self._check_line(state.carried)
        seen = yield from self._lines(lines, state)
        return seen or (bool(state.carry) and state.carry[0][:1] != b":")

    def _lines(self, lines: list[bytes], state: _Assembly) -> Generator[bytes, None, bool]:
        """The events complete lines finish; returns whether any line was more than a comment or blank."""
        seen = False
        for line in lines:
            first = line[0]
            if first in (_LF, _CR):  # a blank line ends the event
                if state.event:
                    yield state.dispatch()
                continue
            if first == _COLON:
                continue
            seen = True
            if first == _D and line.startswith(b"data:"):
                state.data_lines += 1
                if state.data == 1 and _complete(state.event):  # back-to-back payloads, no blank line between
                    yield state.dispatch()
                state.data += 1
                if state.data > MAX_EVENT_LINES:
                    raise ParseError(
                        f"a stream event has more than {MAX_EVENT_LINES} data lines; the provider's stream is malformed"
                    )
            elif first == _E and line.startswith(b"event:"):
                if state.data == 1 and _complete(state.event):
                    yield state.dispatch()
            else:
                state.other_lines += 1
            state.event.append(line)
            state.size += len(line)
            if state.size > self.max_event:
                raise ParseError(
                    f"a stream event is larger than {self.max_event >> 20} MiB; openheim does not read events that big"
                )
        return seen

    def _quiet(self, last_content: float, content: bool) -> float:
        """The time content last arrived, now that a chunk did; a TransportError once it is too long ago."""
        now = self.clock()
        if content:
            return now
        if self.idle_secs is not None and now - last_content > self.idle_secs:
            raise TransportError(
                f"the provider sent only keep-alive comments for {self.idle_secs:g} s "
                "(timeout_secs); it stopped responding"
            )
        return last_content

    def _check_line(self, length: int) -> None:
        if length > self.max_line:
            raise ParseError(f"stream line longer than {self.max_line} bytes")


class _Assembly:
    """The event being put together from lines, the start of a line not yet ended, and the line counts.

    A plain class, not a dataclass: a plain run reads a stream, and compiles no dataclass method for it."""

    __slots__ = ("carried", "carry", "data", "data_lines", "event", "other_lines", "size")

    def __init__(self) -> None:
        self.event: list[bytes] = []
        self.size = 0  # bytes in ``event``
        self.data = 0  # data lines in ``event``
        self.carry: list[bytes] = []  # pieces of a line not yet terminated
        self.carried = 0
        self.data_lines = 0
        self.other_lines = 0

    def dispatch(self) -> bytes:
        """The finished event, framed; the assembly starts a new one."""
        framed = _framed(self.event)
        self.event, self.size, self.data = [], 0, 0
        return framed


def _one_event(chunk: bytes) -> bool:
    """Whether ``chunk`` is exactly one framed event, ``data:`` or ``event:`` then ``data:``, LF line ends."""
    end = len(chunk) - 2
    if chunk[end:] != b"\n\n" or chunk.find(b"\r") >= 0:
        return False
    first = chunk.find(b"\n")
    if chunk[:5] == b"data:":
        return first == end
    return chunk[:6] == b"event:" and chunk[first + 1 : first + 6] == b"data:" and chunk.find(b"\n", first + 1) == end


def _framed(event: list[bytes]) -> bytes:
    """The event's lines, ending in the blank line that tells sseclient the event is complete."""
    last = event[-1]
    end = b"\r" if last[-1] == _CR else b"\n" if last[-1] == _LF else b"\n\n"
    framed = b"".join(event) + end if len(event) > 1 else last + end
    return framed if framed.isascii() else _valid_utf8(framed)


def _valid_utf8(framed: bytes) -> bytes:
    """The event as valid UTF-8: invalid bytes become U+FFFD (sseclient would raise on them)."""
    try:
        framed.decode("utf-8")
    except UnicodeDecodeError:
        return framed.decode("utf-8", "replace").encode("utf-8")
    return framed


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


class EventStream:
    """(event name, data) for every dispatched event of a byte stream, parsed by sseclient-py.

    ``head``, ``data_lines`` and ``other_lines`` are those of its ``EventFrames`` (see there).
    """

    def __init__(
        self,
        chunks: Iterable[bytes],
        max_line: int = MAX_LINE_BYTES,
        max_event: int = MAX_EVENT_BYTES,
        idle_secs: float | None = None,
    ) -> None:
        self.frames = EventFrames(chunks, max_line, max_event, idle_secs)

    @property
    def head(self) -> bytes:
        return self.frames.head

    @property
    def data_lines(self) -> int:
        return self.frames.data_lines

    @property
    def other_lines(self) -> int:
        return self.frames.other_lines

    def __iter__(self) -> Iterator[tuple[str, str]]:
        """Comments and data-less events are skipped."""
        for event in sseclient.SSEClient(iter(self.frames)).events():
            yield event.event, event.data


def iter_sse(chunks: Iterable[bytes]) -> Iterator[tuple[str, str]]:
    """(event name, data) for every dispatched event of a byte stream."""
    return iter(EventStream(chunks))


_raw_decode = json.JSONDecoder().raw_decode


def parse_json(data: str, warn: bool = True) -> Any:
    """The JSON value of an SSE payload, or None (with a warning, unless ``warn`` is False) when it is not JSON."""
    try:
        if data[:1] == "{":  # the usual payload: no whitespace around it to skip first
            value, end = _raw_decode(data)
            if end == len(data) or data[end:].isspace():
                return value
        return json.loads(data)
    except (ValueError, RecursionError):
        if warn:
            log.warning("skipping a stream payload that is not valid JSON: %s", data[:200])
        return None
