"""Cancel ends a read blocked on a provider that sent its response head and then nothing, within 1 s,
on every front end: `run` (SIGINT, SIGTERM), `acp` (session/cancel) and `serve` (session/cancel over /acp).

The reply is an event stream with no length: chunked, or (the case that used to wait out timeout_secs)
one that ends when the server closes, whose socket urllib3's connection no longer holds.
"""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from acp_wire import AcpWire
from cli_helpers import spawn, write_config
from ws_client import TOKEN, WsAcp, running_server

HEADS = {
    "chunked": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n",
    "until-close": b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n\r\n",
}
LIMIT = 1.0


class SilentProvider:
    """Answers every request with ``head`` and then nothing (holding the connection open)."""

    def __init__(self, head: bytes) -> None:
        self.head = head
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.answered = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.listener.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            data = b""
            while b"\r\n\r\n" not in data:
                more = conn.recv(65536)
                if not more:
                    break
                data += more
            conn.sendall(self.head)
            self.held.append(conn)
            self.answered.set()

    def close(self) -> None:
        self.listener.close()
        for conn in self.held:
            conn.close()


@contextmanager
def silent_provider(home: Path, framing: str) -> Iterator[SilentProvider]:
    provider = SilentProvider(HEADS[framing])
    write_config(home, provider.base_url)
    # a long timeout: the cancel, not timeout_secs, must end the read
    config = home / "config.toml"
    config.write_text(config.read_text().replace("timeout_secs = 5", "timeout_secs = 60"))
    try:
        yield provider
    finally:
        provider.close()


@pytest.mark.parametrize("framing", sorted(HEADS))
@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_run_exits_within_a_second_of_a_signal(framing, sig, code, isolated_home, tmp_path):
    with silent_provider(isolated_home, framing) as provider:
        proc = spawn("run", "hi", cwd=tmp_path)
        try:
            assert provider.answered.wait(30), "openheim never asked the provider"
            time.sleep(0.3)  # reading the body now
            started = time.monotonic()
            proc.send_signal(sig)
            proc.wait(timeout=10)
            took = time.monotonic() - started
        finally:
            proc.kill()
            proc.communicate()
    assert proc.returncode == code
    assert took < LIMIT, f"exit took {took:.2f} s"


def _cancel_within_a_second(client: AcpWire | WsAcp, provider: SilentProvider, project: Path) -> None:
    client.initialize()
    sid = client.new_session(project)
    request_id = client.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    assert provider.answered.wait(30), "openheim never asked the provider"
    time.sleep(0.3)
    started = time.monotonic()
    client.notify("session/cancel", {"sessionId": sid})
    response, _ = client.until_response(request_id)
    took = time.monotonic() - started
    assert response["result"] == {"stopReason": "cancelled"}
    assert took < LIMIT, f"the prompt answered {took:.2f} s after session/cancel"


@pytest.mark.parametrize("framing", sorted(HEADS))
def test_acp_session_cancel_answers_cancelled_within_a_second(framing, isolated_home, tmp_path):
    with silent_provider(isolated_home, framing) as provider:
        wire = AcpWire()
        try:
            _cancel_within_a_second(wire, provider, tmp_path.resolve())
        finally:
            wire.close()


def test_serve_session_cancel_answers_cancelled_within_a_second(isolated_home, tmp_path):
    project = tmp_path.resolve()
    with silent_provider(isolated_home, "until-close") as provider, running_server(project, token=TOKEN) as server:
        client = WsAcp(server, "/acp", token=TOKEN)
        try:
            _cancel_within_a_second(client, provider, project)
        finally:
            client.close()
