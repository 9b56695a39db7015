"""web_fetch's SSRF guard (table-driven) and its HTTP behaviour against real loopback servers.

Positive-path tests reach the loopback test server only through WebFetchTool's constructor-only
test seam (a resolver and an allowed address); the default tool refuses the same address.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from openheim.core.turn_context import TurnContext
from openheim.errors import ToolExecutionError
from openheim.tools.html_text import html_to_text
from openheim.tools.netguard import is_public, parse_literal
from openheim.tools.web_fetch import MAX_BYTES, WebFetchTool


class Handler(BaseHTTPRequestHandler):
    """Routes: /html, /json, /plain, /png, /big, /missing, /redirect, /slow, /latin1, /bare."""

    routes: dict = {}
    hits: list = []

    def do_GET(self) -> None:
        type(self).hits.append((self.path, self.headers.get("Host")))
        status, headers, body, delay = type(self).routes.get(self.path, (404, {}, b"nope", 0))
        if delay:
            time.sleep(delay)
        if status == 0:  # raw bytes instead of an HTTP response
            self.wfile.write(body)
            return
        self.send_response(status)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except OSError:
            pass

    def log_message(self, *args) -> None:
        pass


def serve(routes: dict):
    handler = type("H", (Handler,), {"routes": routes, "hits": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    return server, handler


@pytest.fixture
def tripwire():
    """A loopback server that must never be reached by a refused fetch."""
    server, handler = serve({})
    yield server.server_address[1], handler.hits
    server.shutdown()
    server.server_close()


@pytest.fixture
def site(tripwire):
    port_trip = tripwire[0]
    routes = {
        "/html": (
            200,
            {"Content-Type": "text/html; charset=utf-8"},
            b"<html><head><style>p{}</style><script>alert(1)</script></head><body><h1>Title</h1>"
            b"<p>Tom &amp; Jerry&nbsp;&lt;3&gt; &quot;x&quot; &#39;y&#39;</p><div>two</div>\n\n\n<p>  end </p>"
            b"</body></html>",
            0,
        ),
        "/json": (200, {"Content-Type": "application/json"}, b'{"a": 1}', 0),
        "/plain": (200, {"Content-Type": "text/plain"}, b"plain text", 0),
        "/bare": (200, {}, b"no type", 0),
        "/latin1": (200, {"Content-Type": "text/plain; charset=latin-1"}, "café".encode("latin-1"), 0),
        "/png": (200, {"Content-Type": "image/png"}, b"\x89PNG", 0),
        "/big": (200, {"Content-Type": "text/plain"}, b"z" * (MAX_BYTES + 5000), 0),
        "/missing": (404, {"Content-Type": "text/plain"}, b"gone", 0),
        "/redirect": (302, {"Location": f"http://127.0.0.1:{port_trip}/secret"}, b"", 0),
        "/relative": (301, {"Location": "/plain"}, b"", 0),
        "/slow": (200, {"Content-Type": "text/plain"}, b"late", 1.5),
        "/garbage": (0, {}, b"NOT HTTP AT ALL\r\n\r\n", 0),
        "/short": (0, {}, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nContent-Type: text/plain\r\n\r\nabc", 0),
    }
    server, handler = serve(routes)
    yield server.server_address[1], handler.hits
    server.shutdown()
    server.server_close()


def ctx() -> TurnContext:
    return TurnContext()


def fetch(tool: WebFetchTool, url: str, context: TurnContext | None = None) -> str:
    return tool.execute({"url": url}, context or ctx())


def public_test_tool(**kwargs) -> WebFetchTool:
    """The test seam: 'public.test' resolves to loopback, and loopback counts as public."""
    return WebFetchTool(
        lambda host, port: ["127.0.0.1"] if host == "public.test" else [], allowed_addresses=["127.0.0.1"], **kwargs
    )


LITERAL_TARGETS = [
    "http://127.0.0.1:{trip}/",
    "https://127.0.0.1:{trip}/",
    "http://127.255.255.254/",
    "http://0.0.0.0:{trip}/",
    "http://0:{trip}/",
    "http://2130706433:{trip}/",
    "http://017700000001:{trip}/",
    "http://0x7f000001:{trip}/",
    "http://0x7f.0.0.1:{trip}/",
    "http://0177.0.0.1:{trip}/",
    "http://127.1:{trip}/",
    "http://[::1]:{trip}/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]:{trip}/",
    "http://[::ffff:7f00:1]:{trip}/",
    "http://[0:0:0:0:0:ffff:7f00:0001]/",
    "http://[::127.0.0.1]/",
    "http://[::ffff:0:7f00:1]/",
    "http://[64:ff9b::7f00:1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[2002:7f00:1::1]/",
    "http://[2002:c0a8:101::]/",
    "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:169.254.169.254]/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://10.0.0.1/",
    "http://10.255.255.255/",
    "http://172.16.0.1/",
    "http://172.31.255.255/",
    "http://192.168.0.1/",
    "http://192.168.255.255/",
    "http://192.0.0.8/",
    "http://192.0.2.1/",
    "http://198.18.0.1/",
    "http://198.19.255.255/",
    "http://198.51.100.7/",
    "http://203.0.113.9/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://[fe80::1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fec0::1]/",
    "http://[ff02::1]/",
    "http://[2001:db8::1]/",
    "http://[2001::1]/",
    "http://[64:ff9b:1::1]/",
    "http://[100::1]/",
    "http://[::ffff:10.0.0.1]/",
]
RESOLVED_TARGETS = [
    ("loopback.test", ["127.0.0.1"]),
    ("metadata.test", ["169.254.169.254"]),
    ("v6loop.test", ["::1"]),
    ("mapped.test", ["::ffff:127.0.0.1"]),
    ("nat64.test", ["64:ff9b::a00:1"]),
    ("sixtofour.test", ["2002:a00:1::1"]),
    ("cgnat.test", ["100.100.100.100"]),
    ("second-answer.test", ["93.184.216.34", "10.0.0.1"]),
    ("linklocal6.test", ["fe80::1%1"]),
]


@pytest.mark.parametrize("url", LITERAL_TARGETS)
def test_literal_addresses_are_refused(url, tripwire):
    port, hits = tripwire
    resolved: list[str] = []
    tool = WebFetchTool(lambda host, p: resolved.append(host) or ["93.184.216.34"])
    with pytest.raises(ToolExecutionError, match="address is not publicly routable"):
        fetch(tool, url.format(trip=port))
    assert resolved == [] and hits == []


@pytest.mark.parametrize("host,answers", RESOLVED_TARGETS)
def test_names_resolving_to_private_addresses_are_refused(host, answers, tripwire):
    port, hits = tripwire
    tool = WebFetchTool(lambda h, p: answers)
    with pytest.raises(ToolExecutionError, match=f"Refusing to fetch {host}: resolves to non-public address"):
        fetch(tool, f"http://{host}:{port}/")
    assert hits == []


def test_localhost_through_the_system_resolver_is_refused(tripwire):
    port, hits = tripwire
    with pytest.raises(ToolExecutionError, match="Refusing to fetch localhost: resolves to non-public address"):
        fetch(WebFetchTool(), f"http://localhost:{port}/")
    assert hits == []


def test_the_default_tool_refuses_the_test_server(site):
    port, hits = site
    with pytest.raises(ToolExecutionError, match="not publicly routable"):
        fetch(WebFetchTool(), f"http://127.0.0.1:{port}/plain")
    assert hits == []


def test_target_table_is_big_enough():
    assert len(LITERAL_TARGETS) + len(RESOLVED_TARGETS) >= 30


@pytest.mark.parametrize(
    "url,message",
    [
        ("file:///etc/passwd", "Unsupported URL scheme 'file'"),
        ("ftp://example.com/x", "Unsupported URL scheme 'ftp'"),
        ("gopher://127.0.0.1:70/", "Unsupported URL scheme 'gopher'"),
        ("javascript:alert(1)", "Unsupported URL scheme 'javascript'"),
        ("example.com/path", "Unsupported URL scheme ''"),
        ("http://", "URL has no host"),
        ("http:///etc/passwd", "URL has no host"),
        ("http://[::1/", "Invalid URL"),
        ("http://example.com:99999/", "invalid port"),
    ],
)
def test_bad_urls(url, message):
    with pytest.raises(ToolExecutionError, match=message):
        fetch(WebFetchTool(lambda h, p: ["93.184.216.34"]), url)


def test_redirect_to_loopback_is_reported_not_followed(site, tripwire):
    port, _ = site
    trip_port, trip_hits = tripwire
    out = fetch(public_test_tool(), f"http://public.test:{port}/redirect")
    assert out.startswith(
        f"http://public.test:{port}/redirect redirected (HTTP 302) to http://127.0.0.1:{trip_port}/secret."
    )
    assert "fetch" in out and trip_hits == []


def test_relative_redirect_is_made_absolute(site):
    port, _ = site
    assert f"to http://public.test:{port}/plain." in fetch(public_test_tool(), f"http://public.test:{port}/relative")


def test_connection_is_pinned_to_the_checked_address(site, monkeypatch):
    port, hits = site
    answers = iter([["127.0.0.1"], ["10.0.0.1"]])
    calls: list[str] = []

    def rebinding(host: str, p: int) -> list[str]:
        calls.append(host)
        return next(answers)

    def no_dns(*args, **kwargs):
        raise AssertionError("a second DNS lookup happened")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    tool = WebFetchTool(rebinding, allowed_addresses=["127.0.0.1"])
    assert fetch(tool, f"http://rebind.test:{port}/plain") == "plain text"
    assert calls == ["rebind.test"]
    assert hits == [("/plain", f"rebind.test:{port}")]


def test_html_is_converted_to_text(site):
    port, _ = site
    expected = "Title\n\nTom & Jerry\u00a0<3> \"x\" 'y'\n\ntwo\n\nend"
    assert fetch(public_test_tool(), f"http://public.test:{port}/html") == expected


@pytest.mark.parametrize(
    "path,expected",
    [
        ("/json", '{"a": 1}'),
        ("/plain", "plain text"),
        ("/bare", "no type"),
        ("/latin1", "café"),
    ],
)
def test_allowed_content_types(site, path, expected):
    port, _ = site
    assert fetch(public_test_tool(), f"http://public.test:{port}{path}") == expected


def test_unsupported_content_type(site):
    port, _ = site
    with pytest.raises(ToolExecutionError, match="has unsupported content type 'image/png'"):
        fetch(public_test_tool(), f"http://public.test:{port}/png")


def test_non_2xx_is_an_error(site):
    port, _ = site
    url = f"http://public.test:{port}/missing"
    with pytest.raises(ToolExecutionError, match=f"{url} returned HTTP 404"):
        fetch(public_test_tool(), url)


def test_body_is_capped(site):
    port, _ = site
    out = fetch(public_test_tool(), f"http://public.test:{port}/big")
    assert out == "z" * MAX_BYTES + f"\n[content truncated at {MAX_BYTES} bytes]\n"


def test_total_timeout(site):
    port, _ = site
    start = time.monotonic()
    with pytest.raises(ToolExecutionError, match="timed out after 0.3 seconds"):
        fetch(public_test_tool(timeout=0.3), f"http://public.test:{port}/slow")
    assert time.monotonic() - start < 1.4


def test_cancel_interrupts_the_fetch(site):
    port, _ = site
    context = ctx()
    threading.Timer(0.2, context.cancel.cancel).start()
    start = time.monotonic()
    with pytest.raises(ToolExecutionError, match="web_fetch cancelled"):
        fetch(public_test_tool(), f"http://public.test:{port}/slow", context)
    assert time.monotonic() - start < 1.4


@pytest.mark.parametrize(
    "addr",
    ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1111", "::ffff:8.8.8.8", "2002:808:808::1", "64:ff9b::808:808"],
)
def test_public_addresses_pass(addr):
    assert is_public(ipaddress.ip_address(addr))


@pytest.mark.parametrize(
    "host,expected",
    [
        ("2130706433", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0177.0.0.01", "127.0.0.1"),
        ("::ffff:7f00:1", "::ffff:7f00:1"),
        ("example.com", None),
        ("1.2.3.4.5", None),
    ],
)
def test_parse_literal_forms(host, expected):
    parsed = parse_literal(host)
    assert (str(parsed) if parsed is not None else None) == expected


def test_html_to_text_details():
    html = "<p>a</p><!-- hidden --><SCRIPT type='x'>var a = '<p>';</SCRIPT>b<br/>c &amp;lt; &#x41;<style>x"
    assert html_to_text(html) == "a\nb\nc &lt; A"


def _self_signed(tmp_path, name: str):
    import shutil
    import subprocess

    if shutil.which("openssl") is None:
        pytest.skip("openssl not installed")
    cert, key = tmp_path / f"{name}.pem", tmp_path / f"{name}.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            str(key),
            "-out",
            str(cert),
            "-days",
            "1",
            "-subj",
            f"/CN={name}",
            "-addext",
            f"subjectAltName=DNS:{name}",
        ],
        check=True,
        capture_output=True,
    )
    return cert, key


@pytest.fixture
def tls_site(tmp_path):
    import ssl

    cert, key = _self_signed(tmp_path, "public.test")
    server, handler = serve({"/plain": (200, {"Content-Type": "text/plain"}, b"over tls", 0)})
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(cert, key)
    server.socket = server_ctx.wrap_socket(server.socket, server_side=True)
    client_ctx = ssl.create_default_context(cafile=str(cert))
    yield server.server_address[1], handler.hits, client_ctx
    server.shutdown()
    server.server_close()


def test_https_is_pinned_and_checked_against_the_hostname(tls_site):
    port, hits, client_ctx = tls_site
    tool = WebFetchTool(lambda h, p: ["127.0.0.1"], allowed_addresses=["127.0.0.1"], tls_context=client_ctx)
    assert fetch(tool, f"https://public.test:{port}/plain") == "over tls"
    assert hits == [("/plain", f"public.test:{port}")]
    with pytest.raises(ToolExecutionError, match="failed"):
        fetch(tool, f"https://other.test:{port}/plain")
    assert len(hits) == 1


@pytest.mark.parametrize("path", ["/garbage", "/short"])
def test_broken_responses_are_tool_errors(site, path):
    port, _ = site
    with pytest.raises(ToolExecutionError, match=f"Fetching http://public.test:{port}{path} failed: "):
        fetch(public_test_tool(), f"http://public.test:{port}{path}")


def test_resolution_failure_is_a_tool_error():
    def failing(host: str, port: int) -> list[str]:
        raise socket.gaierror(-2, "Name or service not known")

    with pytest.raises(ToolExecutionError, match="Could not resolve nowhere.test: "):
        fetch(WebFetchTool(failing), "http://nowhere.test/")
    with pytest.raises(ToolExecutionError, match="Could not resolve empty.test: no addresses"):
        fetch(WebFetchTool(lambda h, p: []), "http://empty.test/")


def test_slow_resolution_counts_against_the_deadline_and_can_be_cancelled():
    release = threading.Event()

    def stuck(host: str, port: int) -> list[str]:
        release.wait(5)
        return ["93.184.216.34"]

    start = time.monotonic()
    with pytest.raises(ToolExecutionError, match="Resolving slow.test timed out after 0.2 seconds"):
        fetch(WebFetchTool(stuck, timeout=0.2), "http://slow.test/")
    context = ctx()
    threading.Timer(0.1, context.cancel.cancel).start()
    with pytest.raises(ToolExecutionError, match="web_fetch cancelled"):
        fetch(WebFetchTool(stuck), "http://slow.test/", context)
    assert time.monotonic() - start < 2
    release.set()


@pytest.fixture
def trickler():
    """A server that promises 100000 bytes and closes after them ("Connection: close", as many servers
    answer), then sends one body byte every 0.5 s."""
    listener = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()
    conns: list[socket.socket] = []

    def serve_one(conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n"
            )
            while not stop.wait(0.5):
                try:
                    conn.sendall(b"x")
                except OSError:
                    return

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            conns.append(conn)
            threading.Thread(target=serve_one, args=(conn,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    yield listener.getsockname()[1]
    stop.set()
    listener.close()


def _fetch_in_thread(tool: WebFetchTool, url: str, context: TurnContext) -> tuple[threading.Thread, dict]:
    outcome: dict = {}

    def work() -> None:
        try:
            outcome["result"] = fetch(tool, url, context)
        except ToolExecutionError as e:
            outcome["error"] = e.message
        outcome["elapsed"] = time.monotonic() - start

    start = time.monotonic()
    worker = threading.Thread(target=work, daemon=True)
    worker.start()
    return worker, outcome


def test_total_deadline_holds_against_a_trickling_body(trickler):
    url = f"http://public.test:{trickler}/trickle"
    worker, outcome = _fetch_in_thread(public_test_tool(timeout=1.0), url, ctx())
    worker.join(8)
    assert not worker.is_alive(), "web_fetch kept reading a trickling body past its deadline"
    assert outcome.get("error") == f"Fetching {url} timed out after 1 seconds", outcome
    assert outcome["elapsed"] < 3, outcome


def test_cancel_stops_a_trickling_body(trickler):
    context = ctx()
    worker, outcome = _fetch_in_thread(public_test_tool(), f"http://public.test:{trickler}/trickle", context)
    time.sleep(0.7)
    context.cancel.cancel()
    worker.join(8)
    assert not worker.is_alive(), "web_fetch ignored cancel while reading a trickling body"
    assert outcome["error"] == "web_fetch cancelled"
    assert outcome["elapsed"] < 3, outcome
