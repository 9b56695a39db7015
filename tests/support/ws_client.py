"""A WebSocket ACP client for `openheim serve` tests: bare `/acp` frames or `/ws` envelopes, every agent frame
schema-checked: the protocol half is acp_client.AcpClient, the one shared with the stdio harness (acp_wire.AcpWire)."""

from __future__ import annotations

import json
import queue
import re
import signal
import subprocess
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acp_client import AcpClient
from fake_llm import FakeLLMServer
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from openheim.client import OpenheimClient
from openheim.serve.server import OpenheimServer, ServeOptions

TOKEN = "test-token-0123456789abcdef"


@dataclass
class ServeProcess:
    """A real `openheim serve` subprocess: its port, base URL, the token its first line shows, its stderr."""

    proc: subprocess.Popen
    port: int
    base: str
    token: str | None
    first_line: str

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15) -> tuple[int, str]:
        """Signal it and wait; (exit code, the rest of its stderr)."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, err = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.returncode, err


def start_serve(project: Path, *args: str, env: dict | None = None) -> ServeProcess:
    """`openheim serve --port 0 ARGS` in ``project``; returns once its first stderr line says where it listens."""
    from cli_helpers import spawn

    proc = spawn("serve", "--port", "0", *args, cwd=project, env=env)
    line = proc.stderr.readline()
    while line.startswith("openheim: "):  # log lines (OPENHEIM_LOG) may come first
        line = proc.stderr.readline()
    match = re.search(r"listening on (http://[^/\s]+?:(\d+))/(?:\?token=(\S+))? ", line)
    if not match:
        proc.kill()
        raise AssertionError(f"no listening line: {line!r} {proc.stderr.read()}")
    return ServeProcess(proc, int(match.group(2)), match.group(1), match.group(3), line)


@contextmanager
def serve_process(project: Path, *args: str, env: dict | None = None):
    served = start_serve(project, *args, env=env)
    try:
        yield served
    finally:
        served.stop()


@contextmanager
def running_server(work_dir: Path, **options: Any):
    """An in-process `openheim serve` on 127.0.0.1, port 0, sessions and fs rooted at ``work_dir``."""
    client = OpenheimClient.builder().work_dir(work_dir).build()
    server = OpenheimServer(client, ServeOptions(port=0, **options)).start()
    try:
        yield server
    finally:
        server.shutdown(grace=0.5)


class WsAcp(AcpClient):
    """One socket to `/acp` (bare JSON-RPC) or `/ws` (``{channel, data}``; fs and system frames kept apart)."""

    def __init__(
        self,
        server: OpenheimServer | ServeProcess,
        path: str = "/acp",
        token: str | None = None,
        query_token: bool = False,
        validate: bool = True,
        **connect_kw: Any,
    ) -> None:
        super().__init__(validate)
        self.enveloped = path == "/ws"
        url = f"ws://127.0.0.1:{server.port}{path}"
        headers = dict(connect_kw.pop("additional_headers", {}))
        if token and query_token:
            url += f"?token={token}"
        elif token:
            headers["Authorization"] = f"Bearer {token}"
        self.ws = connect(url, additional_headers=headers, open_timeout=10, **connect_kw).__enter__()
        self.fs: queue.Queue = queue.Queue()
        self.system: queue.Queue = queue.Queue()
        self.closed: ConnectionClosed | None = None
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        try:
            for message in self.ws:
                assert isinstance(message, str), "the server sends text frames"
                frame = json.loads(message)
                if not self.enveloped:
                    self.frames.put(frame)
                    continue
                assert set(frame) == {"channel", "data"}, frame
                {"agent": self.frames, "fs": self.fs, "system": self.system}[frame["channel"]].put(frame["data"])
        except ConnectionClosed as e:
            self.closed = e
        finally:
            self.frames.put(None)

    def _why(self) -> str:
        return f"the socket closed: {self.closed}" if self.closed else "the socket is open"

    def _at_end(self) -> None:
        self.frames.put(None)  # every later read sees the end too

    def _write(self, message: Any) -> None:
        self.ws.send(json.dumps({"channel": "agent", "data": message} if self.enveloped else message))

    def send_fs(self, data: Any) -> None:
        self.ws.send(json.dumps({"channel": "fs", "data": data}))

    def fs_call(self, timeout: float = 10.0, **request: Any) -> dict:
        """One fs request and its reply (the next fs message)."""
        self.send_fs(request)
        return self.fs.get(timeout=timeout)

    def close(self) -> None:
        self.ws.close()


__all__ = ["TOKEN", "FakeLLMServer", "WsAcp", "running_server"]
