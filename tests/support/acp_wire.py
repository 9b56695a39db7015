"""A raw JSON-RPC harness for `openheim acp`: hand-made lines in, every stdout line out and schema-checked
(the protocol half is acp_client.AcpClient, shared with the WebSocket client ws_client.WsAcp)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from acp_client import AcpClient, agent_text, allow_once, updates
from cli_helpers import ROOT

__all__ = ["AcpWire", "agent_text", "allow_once", "client_env", "updates"]

CLIENT_ENV = ("HOME", "PATH", "USER", "SHELL", "TERM", "LOGNAME")


def client_env(extra: dict | None = None) -> dict:
    """What the Python ACP client passes: only a few inherited variables plus explicit ones."""
    env = {k: os.environ[k] for k in CLIENT_ENV if k in os.environ}
    env.update(
        {"PYTHONPATH": str(ROOT), "OPENHEIM_HOME": os.environ["OPENHEIM_HOME"], "NO_PROXY": "127.0.0.1,localhost"}
    )
    env.update(extra or {})
    return env


class AcpWire(AcpClient):
    """A spawned `openheim acp` driven line by line."""

    def __init__(
        self,
        *args: str,
        env: dict | None = None,
        cwd: Path | None = None,
        command: str = "acp",
        validate: bool = True,
        prefix: tuple[str, ...] = (),
    ) -> None:
        """``prefix`` runs the agent through another command (e.g. setpriv, to run it as another user)."""
        super().__init__(validate)
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "openheim", *args, command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=client_env(env),
            cwd=cwd or "/",
        )
        self.stderr = bytearray()
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.frames.put(line)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr += line

    def _why(self) -> str:
        return f"stderr: {self.stderr.decode()[-2000:]}"

    def _decode(self, line: bytes) -> dict:
        assert line.endswith(b"\n")
        return json.loads(line)

    def _write(self, message: Any) -> None:
        self.send_raw(json.dumps(message).encode() + b"\n")

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def close(self, timeout: float = 5.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
