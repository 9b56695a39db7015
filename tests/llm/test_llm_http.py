"""The shared POST helper: error mapping, Retry-After, redirects, timeouts and cancellation."""

from __future__ import annotations

import socket
import threading
import time
from email.utils import formatdate

import pytest
from fake_llm import FakeLLMServer, Fault, Reply

from openheim.core.llm.http import USER_AGENT, HttpTransport, read_chunks
from openheim.core.llm.http_errors import error_for_status, is_overflow, parse_retry_after
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    ApiError,
    Cancelled,
    ConfigError,
    ContextOverflow,
    HttpError,
    TransportError,
)

OVERFLOW_BODIES = [
    '{"error":{"code":"context_length_exceeded"}}',
    "This model's maximum context length is 128000 tokens",
    "Please reduce the length of the messages or functions.",
    "prompt is too long: 208310 tokens > 200000 maximum",
    "The input token count (1054016) exceeds the maximum number of tokens allowed (1048576).",
    "the request exceeds the available context size. try increasing the context size",
    "Your input exceeds the context window of this model.",
    "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000",
    "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
]


@pytest.mark.parametrize("body", OVERFLOW_BODIES)
def test_overflow_phrases_on_400(body):
    assert is_overflow(400, body.upper())  # matched case-insensitively
    assert isinstance(error_for_status(400, body, {}), ContextOverflow)


@pytest.mark.parametrize("status", [401, 429, 500])
def test_overflow_phrases_under_other_statuses_are_not_overflow(status):
    assert not is_overflow(status, "maximum context length exceeded")
    err = error_for_status(status, "maximum context length", {})
    assert isinstance(err, HttpError) and err.status == status


def test_413_is_always_overflow():
    assert isinstance(error_for_status(413, "request_too_large", {}), ContextOverflow)


def test_llama_cpp_overflow_type_trusted_under_any_status():
    body = '{"error":{"code":500,"type":"exceed_context_size_error","message":"..."}}'
    assert isinstance(error_for_status(500, body, {}), ContextOverflow)


def test_plain_400_is_http_error():
    err = error_for_status(400, '{"error":{"message":"bad tool schema"}}', {})
    assert isinstance(err, HttpError) and str(err) == "HTTP 400: bad tool schema"
    assert err.body == '{"error":{"message":"bad tool schema"}}'  # the raw body stays available


def test_retry_after_sources():
    assert parse_retry_after({"Retry-After": "3"}) == 3.0
    assert parse_retry_after({"retry-after": "1.5"}) == 1.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    now = time.time()
    date = formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"Retry-After": date}, now=now) <= 31
    assert parse_retry_after({"Retry-After": formatdate(now - 100, usegmt=True)}, now=now) == 0.0


def post(transport: HttpTransport, srv: FakeLLMServer, cancel: CancelToken | None = None) -> bytes:
    url = srv.base_url + "/chat/completions"
    with transport.stream(
        url, {"model": "m", "messages": []}, {"Accept": "text/event-stream"}, cancel or CancelToken()
    ) as resp:
        return b"".join(read_chunks(resp))


def test_http_error_carries_status_body_and_retry_after():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Fault(status=503, retry_after=7, body="upstream down"))
        with pytest.raises(HttpError) as info:
            post(HttpTransport(5), srv)
    assert (info.value.status, info.value.body, info.value.retry_after) == (503, "upstream down", 7.0)


def test_redirect_is_not_followed():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Fault(status=307, headers={"Location": srv.base_url + "/chat/completions"}, body=""))
        with pytest.raises(HttpError) as info:
            post(HttpTransport(5), srv)
        assert len(srv.requests) == 1
    assert info.value.status == 307 and "redirect" in str(info.value) and "api_base" in str(info.value)


def test_connection_refused_is_transport_error():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    t = HttpTransport(2)
    with pytest.raises(TransportError, match="could not connect"):
        with t.stream(f"http://127.0.0.1:{port}/v1/x", {}, {}, CancelToken()):
            pass


def test_idle_read_timeout_before_the_head():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(text="late", head_delay=3))
        start = time.monotonic()
        with pytest.raises(TransportError, match="timeout_secs"):
            post(HttpTransport(0.3), srv)
        assert time.monotonic() - start < 1.5


def test_idle_read_timeout_mid_stream_is_not_a_total_deadline():
    with FakeLLMServer("openai") as srv:
        # 8 events 0.15 s apart: 1.05 s in total, longer than the 0.5 s idle timeout
        srv.enqueue(Reply(text="a b c d", delay=0.15))
        assert b"[DONE]" in post(HttpTransport(0.5), srv)
        srv.enqueue(Reply(text="a b c d", delay=1.0))
        start = time.monotonic()
        with pytest.raises(TransportError, match="no data"):
            post(HttpTransport(0.3), srv)
        assert time.monotonic() - start < 0.9


def _cancel_after(token: CancelToken, seconds: float) -> list[float]:
    stamp: list[float] = []

    def fire() -> None:
        stamp.append(time.monotonic())
        token.cancel()

    threading.Timer(seconds, fire).start()
    return stamp


def test_cancel_during_slow_stream_returns_within_200ms():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(text="x" * 50, chunk_size=1, delay=0.5))
        token = CancelToken()
        stamp = _cancel_after(token, 0.2)
        with pytest.raises(Cancelled):
            post(HttpTransport(30), srv, token)
        assert time.monotonic() - stamp[0] < 0.2


def test_cancel_while_waiting_for_the_head_returns_within_200ms():
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(text="late", head_delay=5))
        token = CancelToken()
        stamp = _cancel_after(token, 0.2)
        with pytest.raises(Cancelled):
            post(HttpTransport(30), srv, token)
        assert time.monotonic() - stamp[0] < 0.2


def test_already_cancelled_token_sends_nothing():
    with FakeLLMServer("openai") as srv:
        token = CancelToken()
        token.cancel()
        with pytest.raises(Cancelled):
            post(HttpTransport(5), srv, token)
        assert srv.requests == []


def test_transport_is_reusable_after_cancel_and_errors():
    t = HttpTransport(5)
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(text="x" * 20, chunk_size=1, delay=0.3), Fault(status=500), Fault(drop_after_chunks=1))
        token = CancelToken()
        _cancel_after(token, 0.1)
        with pytest.raises(Cancelled):
            post(t, srv, token)
        with pytest.raises(HttpError):
            post(t, srv)
        with pytest.raises(TransportError, match="closed mid-response"):
            post(t, srv)
        assert b"echo" in post(t, srv)


def test_concurrent_streams_on_one_transport():
    t = HttpTransport(5)
    results: list[bytes] = []
    with FakeLLMServer("openai") as srv:
        threads = [threading.Thread(target=lambda: results.append(post(t, srv))) for _ in range(6)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
    assert len(results) == 6 and all(b"[DONE]" in r for r in results)


# --- body reading ------------------------------------------------------------------


def _read_request(conn: socket.socket) -> None:
    """Consume one whole request (head and Content-Length body) so closing never resets the client."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(
        next((line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")), b"0")
    )
    while len(body) < length:
        body += conn.recv(65536)


def _close_delimited_server(events: list[bytes], gap: float) -> tuple[socket.socket, threading.Event]:
    """A bare HTTP/1.0-style server: no Content-Length, no chunking, body ends when the socket closes."""
    listener = socket.create_server(("127.0.0.1", 0))
    got_first = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            _read_request(conn)
            conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n")
            for i, event in enumerate(events):
                if i:
                    got_first.wait(gap)
                conn.sendall(event)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return listener, got_first


def test_close_delimited_stream_is_read_in_real_time():
    listener, got_first = _close_delimited_server([b"data: one\n\n", b"data: two\n\n"], gap=5)
    port = listener.getsockname()[1]
    seen = []
    start = time.monotonic()
    with HttpTransport(5).stream(f"http://127.0.0.1:{port}/x", {}, {}, CancelToken()) as resp:
        for data in read_chunks(resp):
            seen.append(data)
            got_first.set()  # the server sends the second event only once the first arrived here
    assert b"".join(seen) == b"data: one\n\ndata: two\n\n" and time.monotonic() - start < 2


def _raw_server(head: bytes, pieces: list[bytes], gap: float = 0.0) -> str:
    """A bare server that answers one request with ``head`` then ``pieces`` (``gap`` apart) as written."""
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            _read_request(conn)
            conn.sendall(head)
            for piece in pieces:
                conn.sendall(piece)
                time.sleep(gap)
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}/x"


CHUNKED_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


@pytest.mark.parametrize("step", [1, 3, 7, 1000])
def test_chunked_framing_split_anywhere(step):
    wire = b"5\r\nhello\r\n7;ext=1\r\n, world\r\n1\r\n!\r\n0\r\n\r\n"
    url = _raw_server(CHUNKED_HEAD, [wire[i : i + step] for i in range(0, len(wire), step)])
    with HttpTransport(5).stream(url, {}, {}, CancelToken()) as resp:
        assert b"".join(read_chunks(resp)) == b"hello, world!"


def test_chunked_stream_is_read_in_real_time():
    url = _raw_server(CHUNKED_HEAD, [b"b\r\ndata: one\n\n\r\n", b"b\r\ndata: two\n\n\r\n0\r\n\r\n"], gap=1.5)
    start = time.monotonic()
    with HttpTransport(5).stream(url, {}, {}, CancelToken()) as resp:
        first = next(read_chunks(resp))
    assert first == b"data: one\n\n" and time.monotonic() - start < 1.0


@pytest.mark.parametrize("wire", [b"5\r\nhel", b"zz\r\nabc\r\n"])
def test_truncated_or_garbled_chunking_is_a_transport_error(wire):
    url = _raw_server(CHUNKED_HEAD, [wire])
    with pytest.raises(TransportError, match="127.0.0.1"):
        with HttpTransport(5).stream(url, {}, {}, CancelToken()) as resp:
            b"".join(read_chunks(resp))


def test_compressed_body_is_decoded():
    import gzip

    body = gzip.compress(b"data: zipped\n\n")
    listener = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            _read_request(conn)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
            )
        listener.close()

    threading.Thread(target=serve, daemon=True).start()
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/x"
    with HttpTransport(5).stream(url, {}, {}, CancelToken()) as resp:
        assert b"".join(read_chunks(resp)) == b"data: zipped\n\n"


def test_netrc_credentials_are_never_sent(isolated_home):
    home = isolated_home.parent
    (home / ".netrc").write_text("machine 127.0.0.1 login user password hunter2\n")
    (home / ".netrc").chmod(0o600)
    with FakeLLMServer("openai") as srv:
        post(HttpTransport(5), srv)
        headers = srv.requests[0].headers
    assert "authorization" not in headers and headers["user-agent"] == USER_AGENT == "openheim"


def test_bad_header_value_never_echoes_the_key():
    with FakeLLMServer("openai") as srv:
        with pytest.raises(ConfigError) as info:
            with HttpTransport(5).stream(
                srv.base_url + "/chat/completions", {}, {"Authorization": "Bearer sk-secret\n"}, CancelToken()
            ):
                pass
    assert "sk-secret" not in str(info.value) and "API key" in str(info.value)


def test_bad_url_is_config_error():
    with pytest.raises(ConfigError, match="api_base"):
        with HttpTransport(5).stream("http://[::1/v1", {}, {}, CancelToken()):
            pass


def test_html_page_instead_of_a_stream_is_reported():
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Portal(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            page = b"<html><body>Welcome</body></html>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(page)))
            self.end_headers()
            self.wfile.write(page)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Portal)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        with pytest.raises(ApiError, match="an HTML page.*it begins '<html><body>Welcome.*check api_base"):
            with HttpTransport(5).stream(f"http://127.0.0.1:{server.server_address[1]}/v1", {}, {}, CancelToken()):
                pass
    finally:
        server.shutdown()
        server.server_close()
