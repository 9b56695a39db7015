"""A provider's malformed chunked reply is a one-line provider error, never MemoryError or ValueError.

A raw socket server writes the bad response; `openheim run` reads it as a user's run would.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from cli_helpers import openheim, write_config

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
FAST_RETRY = {"OPENHEIM_RETRY_BASE_DELAY": "0.01"}


@contextmanager
def raw_server(reply: bytes) -> Iterator[str]:
    """A server that answers every request with ``reply`` and closes; yields its base URL."""
    srv = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            with conn:
                data = b""
                while b"\r\n\r\n" not in data:
                    more = conn.recv(65536)
                    if not more:
                        break
                    data += more
                conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{srv.getsockname()[1]}/v1"
    finally:
        srv.close()


@pytest.mark.parametrize(
    "size,expected",
    [
        (b"-5", "sent a malformed chunked reply (an invalid chunk size)"),
        (b"zz", "sent a malformed chunked reply (an invalid chunk size)"),
        (b"FFFFFFFFFF", "closed mid-response"),  # read in pieces until the server closed, never allocated whole
    ],
)
def test_a_bad_chunk_size_is_a_one_line_provider_error(size, expected, isolated_home, tmp_path):
    with raw_server(HEAD + size + b"\r\ndata: {}\r\n") as url:
        write_config(isolated_home, url)
        r = openheim("run", "hi", cwd=tmp_path, env=FAST_RETRY)
    assert r.returncode != 0 and r.stdout == ""
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("Error: ") and expected in last, r.stderr
    assert "MemoryError" not in r.stderr and "ValueError" not in r.stderr and "internal error" not in r.stderr
