"""A raw JSON-RPC harness for `openheim acp`: hand-made lines in, every stdout line out and schema-checked."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_schema_check import check_agent_frame
from cli_helpers import ROOT

CLIENT_ENV = ("HOME", "PATH", "USER", "SHELL", "TERM", "LOGNAME")


def client_env(extra: dict | None = None) -> dict:
    """What the Python ACP client passes: only a few inherited variables plus explicit ones."""
    env = {k: os.environ[k] for k in CLIENT_ENV if k in os.environ}
    env.update(
        {"PYTHONPATH": str(ROOT), "OPENHEIM_HOME": os.environ["OPENHEIM_HOME"], "NO_PROXY": "127.0.0.1,localhost"}
    )
    env.update(extra or {})
    return env


def allow_once(frame: dict) -> dict:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class AcpWire:
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
        self.validate = validate
        self.proc = subprocess.Popen(
            [*prefix, sys.executable, "-m", "openheim", *args, command],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=client_env(env),
            cwd=cwd or "/",
        )
        self.frames: queue.Queue = queue.Queue()
        self.seen: list[dict] = []
        self.client_methods: dict[Any, str] = {}
        self.stderr = bytearray()
        self._next_id = 0
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self) -> None:
        for line in self.proc.stdout:
            self.frames.put(line)
        self.frames.put(None)

    def _read_stderr(self) -> None:
        for line in self.proc.stderr:
            self.stderr += line

    # --- sending -------------------------------------------------------------------

    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        if "id" in message and "method" in message:
            self.client_methods[message["id"]] = message["method"]
        self.send_raw(json.dumps(message).encode() + b"\n")

    def new_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def start(self, method: str, params: Any = None, request_id: Any = None) -> Any:
        request_id = self.new_id() if request_id is None else request_id
        message = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def notify(self, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    # --- receiving -------------------------------------------------------------------

    def next_frame(self, timeout: float = 10.0) -> dict | None:
        """The next stdout line as a validated frame; None at EOF; AssertionError on timeout."""
        try:
            line = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no frame within {timeout} s; stderr: {self.stderr.decode()[-2000:]}") from None
        if line is None:
            return None
        assert line.endswith(b"\n")
        frame = json.loads(line)
        if self.validate:
            check_agent_frame(frame, self.client_methods)
        self.seen.append(frame)
        return frame

    def no_frame_within(self, seconds: float) -> bool:
        try:
            line = self.frames.get(timeout=seconds)
        except queue.Empty:
            return True
        self.frames.put(line)
        return False

    def until_response(
        self, request_id: Any, on_request: Callable[[dict], Any] = allow_once, timeout: float = 10.0
    ) -> tuple[dict, list[dict]]:
        """Frames up to the answer to ``request_id``; agent requests are answered by ``on_request``."""
        before: list[dict] = []
        deadline = time.monotonic() + timeout
        while True:
            frame = self.next_frame(max(0.01, deadline - time.monotonic()))
            assert frame is not None, f"agent exited; stderr: {self.stderr.decode()[-2000:]}"
            if "method" in frame and "id" in frame:
                result = on_request(frame)
                if result is not None:
                    self.send({"jsonrpc": "2.0", "id": frame["id"], "result": result})
            elif "method" not in frame and frame.get("id") == request_id:
                return frame, before
            before.append(frame)

    def call(self, method: str, params: Any = None, **kw: Any) -> tuple[dict, list[dict]]:
        return self.until_response(self.start(method, params), **kw)

    def result(self, method: str, params: Any = None, **kw: Any) -> Any:
        response, _ = self.call(method, params, **kw)
        assert "result" in response, response
        return response["result"]

    # --- conveniences ------------------------------------------------------------------

    def initialize(self, caps: dict | None = None) -> dict:
        return self.result("initialize", {"protocolVersion": 1, "clientCapabilities": caps or {}})

    def new_session(self, cwd: Path, **extra: Any) -> str:
        return self.result("session/new", {"cwd": str(cwd), "mcpServers": [], **extra})["sessionId"]

    def prompt(self, session_id: str, text: str, **kw: Any) -> tuple[dict, list[dict]]:
        return self.call("session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": text}]}, **kw)

    def close(self, timeout: float = 5.0) -> int:
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            return self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


def updates(frames: list[dict], kind: str | None = None) -> list[dict]:
    """The session/update payloads among ``frames`` (of one kind)."""
    out = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return [u for u in out if kind is None or u["sessionUpdate"] == kind]


def agent_text(frames: list[dict]) -> str:
    return "".join(u["content"]["text"] for u in updates(frames, "agent_message_chunk"))
