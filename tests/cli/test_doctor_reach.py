"""`openheim doctor` tries each configured provider endpoint (within 3 s, all at once; `--offline` skips it) and
reports a closed port, a refused key and a server that never answers as problems with the next step."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cli_helpers import openheim, write_config


@contextmanager
def answering(status: int) -> Iterator[list[dict]]:
    """An HTTP server on 127.0.0.1 answering every GET with ``status``; yields the requests' headers."""
    seen: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        seen.append({"base": f"http://127.0.0.1:{server.server_address[1]}/v1"})
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def provider_line(stdout: str) -> str:
    return next(line for line in stdout.splitlines() if "provider fake" in line)


def test_a_closed_port_is_a_problem_and_not_ready(isolated_home):
    port = closed_port()
    write_config(isolated_home, f"http://127.0.0.1:{port}/v1")
    r = openheim("doctor")
    assert r.returncode == 1, r.stdout
    line = provider_line(r.stdout)
    assert line.startswith("FAIL") and "connection refused; check api_base and that the server is up" in line
    assert r.stdout.splitlines()[-1].startswith("not ready: provider fake (default) failed")


def test_a_refused_key_names_where_the_key_comes_from(isolated_home):
    with answering(401) as seen:
        write_config(isolated_home, seen[0]["base"])
        r = openheim("doctor")
    assert r.returncode == 1
    assert "refused the key (HTTP 401); check api_key" in provider_line(r.stdout)
    [request] = seen[1:]
    assert request["path"] == "/v1/models" and request["authorization"] == "Bearer sk-test-SECRET-123"
    assert "sk-test-SECRET-123" not in r.stdout


def test_anthropic_is_asked_with_its_own_headers(isolated_home):
    with answering(200) as seen:
        write_config(isolated_home, seen[0]["base"], kind="anthropic")
        r = openheim("doctor")
    assert r.returncode == 0, r.stdout
    assert provider_line(r.stdout).startswith("ok") and "answered" in provider_line(r.stdout)
    [request] = seen[1:]
    assert request["x-api-key"] == "sk-test-SECRET-123" and request["anthropic-version"] == "2023-06-01"
    assert "authorization" not in request


def test_a_server_with_no_models_list_is_reachable(isolated_home):
    with answering(404) as seen:
        write_config(isolated_home, seen[0]["base"])
        r = openheim("doctor")
    assert r.returncode == 0 and r.stdout.splitlines()[-1].startswith("ready"), r.stdout


def test_a_server_that_never_answers_costs_at_most_the_deadline(isolated_home):
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections (the kernel does) and never answers
        write_config(isolated_home, f"http://127.0.0.1:{silent.getsockname()[1]}/v1")
        offline_start = time.monotonic()
        assert openheim("doctor", "--offline").returncode == 0
        offline = time.monotonic() - offline_start
        start = time.monotonic()
        r = openheim("doctor")
        took = time.monotonic() - start
    assert r.returncode == 1
    assert "within 3 s" in provider_line(r.stdout) or "for 3 s" in provider_line(r.stdout)
    assert took < offline + 4.0, (took, offline)


def test_offline_sends_nothing(isolated_home):
    with answering(200) as seen:
        write_config(isolated_home, seen[0]["base"])
        r = openheim("doctor", "--offline")
    assert r.returncode == 0 and seen[1:] == []
