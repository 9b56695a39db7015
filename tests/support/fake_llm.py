"""A scripted fake LLM server speaking the OpenAI, Anthropic or Gemini streaming wire on 127.0.0.1.

    with FakeLLMServer(wire="openai") as srv:          # "openai" | "anthropic" | "gemini"
        srv.enqueue(Reply(text="done"), Fault(status=429, retry_after=1))
        ... point a client at srv.base_url ...
        srv.requests[0].body                           # .path .headers (case-insensitive) .body .raw .query

An empty queue answers ``echo: <last user message text>``. Replies: text/thinking/tool_calls/usage,
``chunk_size`` and ``delay`` per event, the wire's own ``finish`` reason, ``refusal``, ``complete=False`` (no end
marker), ``head_delay`` (before the response head), ``raw_sse`` (hand-made writes), ``whole`` (the wire's
non-streamed JSON reply instead of a stream), ``blank_lines=False`` (events back to back), ``content_type``
(None: no header) and ``headers``. Faults: HTTP ``status`` with
the wire's error body (or ``body``) and ``retry_after`` (Gemini: RetryInfo in the body), ``drop_after_chunks``,
``in_stream_error`` (after ``error_after_chunks``), ``overflow``. Server options: ``max_request_bytes`` (bigger
requests get the overflow error and leave the queue alone), ``slow`` (delay between all events), ``burst``
(coalesced writes). ``clear()`` drops what is left of a script.
"""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fake_wires import (
    RENDERERS,
    WHOLE,
    StreamCtx,
    error_body,
    last_user_text,
    overflow_body,
    stream_error,
    without_blank_lines,
)

__all__ = ["FakeLLMServer", "Fault", "RecordedRequest", "Reply", "ToolCall"]

_BASE_PATHS = {"openai": "/v1", "anthropic": "/v1", "gemini": "/v1beta"}
_FLUSH_AT = 32 * 1024


@dataclass
class ToolCall:
    """A tool call the fake model makes; ``arguments`` is a dict or raw JSON text."""

    name: str
    arguments: Any = field(default_factory=dict)
    id: str | None = None
    signature: str | None = None  # Gemini thoughtSignature


@dataclass
class Reply:
    """One scripted streamed reply."""

    text: str = ""
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    usage: tuple | None = None  # (input, output[, cached[, cache written]]); None = estimate
    chunk_size: int | None = None  # characters per delta; None = word by word
    delay: float = 0.0  # seconds between events (server ``slow`` when 0)
    finish: str | None = None  # the wire's own finish/stop reason
    refusal: bool = False
    raw_sse: list[str | bytes] | None = None  # hand-made stream, each item one write
    complete: bool = True  # False: omit the wire's end (finish reason / [DONE] / message_stop)
    head_delay: float = 0.0  # seconds before the response head is sent
    signature: str = "sig_fake"  # Anthropic thinking signature
    reasoning_field: str = "reasoning_content"  # OpenAI-compatible thinking field
    whole: bool = False  # answer the wire's whole (non-streamed) JSON reply, as some servers do
    blank_lines: bool = True  # False: no blank line between events
    content_type: str | None = "text/event-stream"  # None: no Content-Type header at all
    headers: dict = field(default_factory=dict)  # extra response headers (e.g. Content-Encoding)


@dataclass
class Fault:
    """A scripted failure: HTTP error, cut stream, in-stream error or context overflow."""

    status: int | None = None
    retry_after: float | str | None = None
    body: str | bytes | dict | None = None  # None: the wire's usual error body for ``status``
    headers: dict = field(default_factory=dict)
    drop_after_chunks: int | None = None
    in_stream_error: str | None = None
    error_after_chunks: int = 0  # content chunks sent before ``in_stream_error``
    overflow: bool = False
    reply: Reply | None = None  # what is streamed before a drop / in-stream error


@dataclass
class RecordedRequest:
    method: str
    path: str
    headers: dict
    body: Any
    raw: bytes
    received_at: float = field(default_factory=time.monotonic)  # when its body was read (time.monotonic)

    @property
    def query(self) -> dict[str, list[str]]:
        return parse_qs(urlsplit(self.path).query)


class _Headers(dict):
    """A dict of request headers with case-insensitive lookups (keys stored lowercase)."""

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and super().__contains__(key.lower())


class _Dropped(Exception):
    """The script asked to cut the connection."""


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _HTTPServer

    def log_message(self, format: str, *args: Any) -> None:  # keep test output quiet
        pass

    def setup(self) -> None:
        super().setup()
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.fake.track(self.connection, True)

    def finish(self) -> None:
        self.server.fake.track(self.connection, False)
        try:
            super().finish()
        except OSError:
            pass

    def do_GET(self) -> None:
        self._send_json(404, {"error": {"message": "not found", "code": 404}})

    def do_POST(self) -> None:
        fake = self.server.fake
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        headers = _Headers((k.lower(), v) for k, v in self.headers.items())
        fake.requests.append(RecordedRequest("POST", self.path, headers, body, raw))
        try:
            self._answer(fake, raw, body)
        except (_Dropped, OSError):
            self.close_connection = True

    def _answer(self, fake: FakeLLMServer, raw: bytes, body: Any) -> None:
        if not fake.path_ok(self.path):
            self._send_json(404, {"error": {"message": f"no route for {self.path}", "code": 404}})
            return
        if fake.max_request_bytes is not None and len(raw) > fake.max_request_bytes:
            self._send_json(400, overflow_body(fake.wire, len(raw)))  # the queue is left untouched
            return
        item = fake.next_item(body)
        if isinstance(item, Fault):
            self._fault(fake, item, raw, body)
        else:
            self._stream(fake, item, body)

    def _fault(self, fake: FakeLLMServer, f: Fault, raw: bytes, body: Any) -> None:
        if f.overflow:
            self._send_json(400, overflow_body(fake.wire, len(raw)))
        elif f.status is not None:
            self._http_error(fake, f)
        else:
            reply = f.reply or Reply(text="this reply is cut off part way through", chunk_size=4)
            limit = f.drop_after_chunks if f.drop_after_chunks is not None else f.error_after_chunks
            self._stream(fake, reply, body, limit=limit, error=f.in_stream_error)

    def _http_error(self, fake: FakeLLMServer, f: Fault) -> None:
        headers = dict(f.headers)
        gemini = fake.wire == "gemini"
        if f.retry_after is not None and not gemini:
            headers.setdefault("Retry-After", str(f.retry_after))
        if f.body is None:
            ra = float(f.retry_after) if gemini and f.retry_after is not None else None
            payload = json.dumps(error_body(fake.wire, f.status, ra)).encode()
        else:
            payload = (
                f.body
                if isinstance(f.body, bytes)
                else (json.dumps(f.body) if isinstance(f.body, dict) else f.body).encode()
            )
        self._send_raw(f.status, payload, headers)

    def _send_json(self, status: int, obj: Any) -> None:
        self._send_raw(status, json.dumps(obj).encode(), {})

    def _send_raw(self, status: int, payload: bytes, headers: dict) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        for k, v in headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        self.wfile.write(payload)

    def _stream(
        self, fake: FakeLLMServer, reply: Reply, body: Any, limit: int | None = None, error: str | None = None
    ) -> None:
        if reply.head_delay and fake.sleep(reply.head_delay):
            raise _Dropped
        if reply.whole:
            payload = json.dumps(fake.render_whole(reply, body)).encode()
            self._send_raw(200, payload, reply.headers)
            return
        self.send_response(200)
        if reply.content_type is not None:
            self.send_header("Content-Type", reply.content_type)
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for k, v in reply.headers.items():
            self.send_header(k, str(v))
        self.end_headers()
        delay = reply.delay or fake.slow
        if reply.raw_sse is not None:
            events = [(p.encode() if isinstance(p, str) else p, False) for p in reply.raw_sse]
            self._write_events(fake, events, delay, flush_each=True)
        else:
            events = fake.render(reply, body)
            if not reply.blank_lines:
                events = without_blank_lines(events)
            if limit is not None:
                events = _cut(events, limit)
            self._write_events(fake, events, delay, flush_each=False)
            if error is None and limit is not None:
                self.connection.shutdown(socket.SHUT_RDWR)
                raise _Dropped
            if error is not None:
                self._chunk(stream_error(fake.wire, error))
        self.wfile.write(b"0\r\n\r\n")

    def _write_events(self, fake: FakeLLMServer, events: list, delay: float, flush_each: bool) -> None:
        buf = bytearray()
        for i, (data, _) in enumerate(events):
            if delay and i and fake.sleep(delay):
                raise _Dropped
            buf += b"%x\r\n%s\r\n" % (len(data), data)
            if delay or flush_each or not fake.burst or len(buf) >= _FLUSH_AT:
                self.wfile.write(buf)
                buf.clear()
                fake.sent_at.append(time.monotonic())
        if buf:
            self.wfile.write(buf)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))


def _cut(events: list, content_chunks: int) -> list:
    """The events up to (not including) content chunk number ``content_chunks + 1``."""
    out, seen = [], 0
    for data, is_content in events:
        if is_content:
            if seen == content_chunks:
                break
            seen += 1
        out.append((data, is_content))
    return out


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    fake: FakeLLMServer

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # clients hanging up early is normal here
            super().handle_error(request, client_address)


class FakeLLMServer:
    """A threaded loopback server replaying scripted replies and faults on one provider wire."""

    def __init__(
        self,
        wire: str = "openai",
        *,
        max_request_bytes: int | None = None,
        slow: float = 0.0,
        burst: bool = False,
        host: str = "127.0.0.1",
    ) -> None:
        if wire not in RENDERERS:
            raise ValueError(f"unknown wire {wire!r}; use one of {sorted(RENDERERS)}")
        self.wire = wire
        self.max_request_bytes = max_request_bytes
        self.slow = slow
        self.burst = burst  # True: coalesce events into 32 KiB writes instead of one write per event
        self.requests: list[RecordedRequest] = []
        self.sent_at: list[float] = []  # time.monotonic() of every flushed write of a stream
        self._queue: deque = deque()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._conns: set = set()
        self._httpd = _HTTPServer((host, 0), _Handler)
        self._httpd.fake = self
        self._thread: threading.Thread | None = None

    # --- lifecycle ---

    def start(self) -> FakeLLMServer:
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.01}, name=f"fake-llm-{self.wire}", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._httpd.shutdown()
        with self._lock:
            conns = list(self._conns)
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._httpd.server_close()
        if self._thread:
            self._thread.join(timeout=5)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- script ---

    @property
    def port(self) -> int:
        return self._httpd.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def base_url(self) -> str:
        """The api_base to configure for this wire."""
        return self.url + _BASE_PATHS[self.wire]

    def enqueue(self, *items: Reply | Fault) -> None:
        with self._lock:
            self._queue.extend(items)

    def clear(self) -> list[Reply | Fault]:
        """Drop every queued item (e.g. after killing a client mid-script); returns what was dropped."""
        with self._lock:
            dropped = list(self._queue)
            self._queue.clear()
        return dropped

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    # --- used by the handler ---

    def track(self, conn: socket.socket, add: bool) -> None:
        with self._lock:
            (self._conns.add if add else self._conns.discard)(conn)

    def sleep(self, seconds: float) -> bool:
        """Wait; True when the server is stopping."""
        return self._stop.wait(seconds)

    def next_item(self, body: Any) -> Reply | Fault:
        with self._lock:
            if self._queue:
                return self._queue.popleft()
        return Reply(text="echo: " + last_user_text(self.wire, body))

    def path_ok(self, path: str) -> bool:
        route = urlsplit(path).path
        if self.wire == "openai":
            return route.endswith("/chat/completions")
        if self.wire == "anthropic":
            return route.endswith("/messages")
        return ":streamGenerateContent" in route

    def render(self, reply: Reply, body: Any) -> list:
        return RENDERERS[self.wire](reply, self._ctx(body))

    def render_whole(self, reply: Reply, body: Any) -> dict:
        return WHOLE[self.wire](reply, self._ctx(body))

    def _ctx(self, body: Any) -> StreamCtx:
        body = body if isinstance(body, dict) else {}
        model = str(body.get("model") or _gemini_model(self.requests) or "fake-model")
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        prompt = len(json.dumps(body)) // 4 + 1
        return StreamCtx(model, include_usage, prompt)


def _gemini_model(requests: list[RecordedRequest]) -> str | None:
    if not requests:
        return None
    route = urlsplit(requests[-1].path).path
    if "/models/" not in route:
        return None
    return route.split("/models/", 1)[1].split(":", 1)[0]
