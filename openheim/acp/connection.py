"""The JSON-RPC message transport: one writer thread owning the output, and futures for our requests to the client.

The framing is the caller's: stdio joins newline-terminated lines into one write, a WebSocket sends each
message as one frame. Either way a ``Sink`` receives the encoded messages in order, in batches.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from openheim.acp.util import INTERNAL_ERROR, RpcError
from openheim.errors import Cancelled

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 64 * 1024 * 1024
_BATCH = 512
_STOP = object()

# A Sink writes encoded messages (each a JSON line ending in a newline) in order; OSError: the peer is gone.
Sink = Callable[[list[bytes]], None]


def stream_sink(out: BinaryIO) -> Sink:
    """Newline framing on a byte stream: a batch is one write and one flush."""

    def send(lines: list[bytes]) -> None:
        out.write(b"".join(lines))
        out.flush()

    return send


def encode(message: dict) -> bytes:
    """One compact JSON line (UTF-8, never a raw newline inside; a lone surrogate becomes '?')."""
    return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "replace") + b"\n"


def read_lines(stream: BinaryIO, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """Lines from ``stream`` until EOF; None stands for a line longer than ``limit`` (skipped)."""
    while True:
        line = stream.readline(limit + 1)
        if not line:
            return
        if len(line) > limit and not line.endswith(b"\n"):
            _skip_rest(stream, limit)
            yield None
            continue
        if line.strip():
            yield line


def _skip_rest(stream: BinaryIO, limit: int) -> None:
    while True:
        chunk = stream.readline(limit)
        if not chunk or chunk.endswith(b"\n"):
            return


class Writer:
    """The only thread that writes the output: messages are queued by any thread and written in order.

    ``out`` is a byte stream (newline framing) or a Sink. With ``max_pending`` (bytes), a peer that falls
    that far behind is given up on: ``on_overflow`` runs once and later messages are dropped, so a client
    that stops reading is never buffered without limit.
    """

    def __init__(
        self, out: BinaryIO | Sink, max_pending: int | None = None, on_overflow: Callable[[], None] | None = None
    ) -> None:
        self._sink: Sink = out if callable(out) else stream_sink(out)
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="acp-writer", daemon=True)
        self.broken = False
        self._max_pending, self._on_overflow = max_pending, on_overflow
        self._pending = 0
        self._pending_lock = threading.Lock()

    def start(self) -> Writer:
        self._thread.start()
        return self

    def send(self, message: dict) -> None:
        self.send_line(encode(message))

    def send_line(self, line: bytes) -> None:
        if self._max_pending is not None and not self._admit(len(line)):
            return
        self._queue.put(line)

    def send_lines(self, lines: Iterable[bytes]) -> None:
        for line in lines:
            self.send_line(line)

    def _admit(self, size: int) -> bool:
        """Count ``size`` bytes as pending; False (and the overflow handler, once) when over the limit."""
        with self._pending_lock:
            if self.broken:
                return False
            if self._pending and self._max_pending is not None and self._pending + size > self._max_pending:
                self.broken = True
                overflow = True
            else:
                self._pending += size
                overflow = False
        if overflow:
            log.warning("the client stopped reading (%d bytes pending); disconnecting it", self._pending)
            if self._on_overflow is not None:
                self._on_overflow()
        return not overflow

    def close(self, timeout: float = 2.0) -> None:
        """Write what is queued, then stop (a writer that was never started has nothing to write)."""
        self._queue.put(_STOP)
        if self._thread.ident is not None:
            self._thread.join(timeout)

    def _run(self) -> None:
        while True:
            batch, stop = self._take()
            if batch and not self.broken:
                self._write(batch)
            if batch and self._max_pending is not None:
                with self._pending_lock:
                    self._pending -= sum(map(len, batch))
            if stop:
                return

    def _take(self) -> tuple[list[bytes], bool]:
        item = self._queue.get()
        if item is _STOP:
            return [], True
        batch = [item]
        while len(batch) < _BATCH:
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _write(self, batch: list[bytes]) -> None:
        try:
            self._sink(batch)
        except (OSError, ValueError) as e:
            log.warning("the output is closed (%s); dropping further output", e)
            self.broken = True


class Pending:
    """One outstanding request to the client; resolved by the reader thread."""

    def __init__(self, request_id: int, method: str) -> None:
        self.id, self.method = request_id, method
        self._done = threading.Event()
        self.result: Any = None
        self.error: RpcError | None = None
        self.cancelled = False
        self.answered = False
        self.on_late: Callable[[Any], None] | None = None  # for an answer that comes after we gave up
        self._lock = threading.Lock()

    def resolve(self, result: Any = None, error: RpcError | None = None) -> None:
        with self._lock:
            if self.answered:
                return
            self.answered = True
            self.result, self.error = result, error
            late = self.on_late if error is None else None
        self._done.set()
        if late is not None:
            late(result)

    def cancel(self) -> None:
        self.cancelled = True
        self._done.set()

    def abandon(self, on_late: Callable[[Any], None]) -> bool:
        """Stop waiting: True if still unanswered (a later success goes to ``on_late``), False if answered."""
        with self._lock:
            if self.answered:
                return False
            self.on_late = on_late
            return True

    def wait(self, cancel: CancelToken | None = None, timeout: float | None = None) -> Any:
        """The result; raises RpcError (client error), Cancelled or TimeoutError."""
        remove = cancel.on_cancel(self.cancel) if cancel is not None else None
        try:
            if not self._done.wait(timeout):
                raise TimeoutError(f"{self.method} got no answer within {timeout:g} s")
        finally:
            if remove is not None:
                remove()
        if self.cancelled:
            raise Cancelled()
        if self.error is not None:
            raise self.error
        return self.result


class Connection:
    """Our side of the JSON-RPC peer: responses, notifications and requests with pending futures."""

    def __init__(self, writer: Writer) -> None:
        self.writer = writer
        self._pending: dict[int, Pending] = {}
        self._lock = threading.Lock()
        self._next_id = 0
        self.closed = False

    def respond(self, request_id: Any, result: Any) -> None:
        self.writer.send({"jsonrpc": "2.0", "id": request_id, "result": result})

    def respond_error(self, request_id: Any, error: RpcError) -> None:
        self.writer.send({"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()})

    def notify(self, method: str, params: dict) -> None:
        self.writer.send({"jsonrpc": "2.0", "method": method, "params": params})

    def start_request(self, method: str, params: dict) -> Pending:
        with self._lock:
            self._next_id += 1
            pending = Pending(self._next_id, method)
            if self.closed:
                pending.resolve(error=RpcError(INTERNAL_ERROR, "the client connection is closed"))
                return pending
            self._pending[pending.id] = pending
        self.writer.send({"jsonrpc": "2.0", "id": pending.id, "method": method, "params": params})
        return pending

    def request(
        self,
        method: str,
        params: dict,
        cancel: CancelToken | None = None,
        timeout: float | None = None,
        on_late: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send a request and block until the client answers (or the turn is cancelled).

        With ``on_late``, a cancelled or timed-out request stays registered, and an answer that still
        arrives is handed to ``on_late`` (e.g. to release a terminal the client created anyway).
        """
        pending = self.start_request(method, params)
        keep = False
        try:
            return pending.wait(cancel, timeout)
        except (Cancelled, TimeoutError):
            if on_late is not None:
                keep = pending.abandon(on_late)
                if not keep and pending.error is None:
                    on_late(pending.result)  # it arrived just as we gave up
            raise
        finally:
            if not keep:
                with self._lock:
                    self._pending.pop(pending.id, None)

    def resolve(self, message: dict) -> None:
        """A response from the client: settle its future; unknown or null ids are ignored."""
        request_id = message.get("id")
        if not isinstance(request_id, int) or isinstance(request_id, bool):
            return
        with self._lock:
            pending = self._pending.pop(request_id, None)
        if pending is None:
            log.debug("ignoring a response with unknown id %r", request_id)
            return
        error = message.get("error")
        if isinstance(error, dict):
            code = error.get("code")
            if not isinstance(code, int):
                code = INTERNAL_ERROR
            pending.resolve(error=RpcError(code, str(error.get("message") or "client error"), error.get("data")))
        else:
            pending.resolve(result=message.get("result"))

    def close(self) -> None:
        """Fail every outstanding request: the client is gone."""
        with self._lock:
            self.closed = True
            pending, self._pending = list(self._pending.values()), {}
        for p in pending:
            p.resolve(error=RpcError(INTERNAL_ERROR, "the client connection is closed"))
