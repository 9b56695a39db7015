"""One ACP client for the tests, whatever carries the frames: JSON-RPC requests out, every agent frame in and
schema-checked, agent requests answered as they come.

A transport subclass says how a message leaves (``_write``), puts each arriving frame (or None at the end) on
``self.frames``, and names what went wrong when nothing comes (``_why``). Subclasses: ``acp_wire.AcpWire``
(`openheim acp` over stdio) and ``ws_client.WsAcp`` (`openheim serve` over a WebSocket).
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from acp_schema_check import check_agent_frame


def allow_once(frame: dict) -> dict:
    return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}


class AcpClient:
    """The transport-free half of an ACP test client: ids, requests, responses and conveniences."""

    def __init__(self, validate: bool = True) -> None:
        self.validate = validate
        self.frames: queue.Queue = queue.Queue()  # bytes lines or parsed dicts (see _decode); None at the end
        self.seen: list[dict] = []
        self.client_methods: dict[Any, str] = {}
        self._next_id = 0

    # --- what a transport provides ------------------------------------------------------

    def _write(self, message: Any) -> None:
        raise NotImplementedError

    def _why(self) -> str:
        """A short line on the transport's state, for failure messages."""
        return ""

    def _decode(self, item: Any) -> dict:
        return item

    def _at_end(self) -> None:
        """Called when the end (None) is taken off the queue."""

    # --- sending -------------------------------------------------------------------

    def send(self, message: Any) -> None:
        if isinstance(message, dict) and "id" in message and "method" in message:
            self.client_methods[message["id"]] = message["method"]
        self._write(message)

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
        """The next agent frame, validated; None at the end; AssertionError on timeout."""
        try:
            item = self.frames.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no ACP frame within {timeout} s; {self._why()}") from None
        if item is None:
            self._at_end()
            return None
        frame = self._decode(item)
        if self.validate:
            check_agent_frame(frame, self.client_methods)
        self.seen.append(frame)
        return frame

    def no_frame_within(self, seconds: float) -> bool:
        try:
            item = self.frames.get(timeout=seconds)
        except queue.Empty:
            return True
        self.frames.put(item)
        return False

    def until_response(
        self, request_id: Any, on_request: Callable[[dict], Any] = allow_once, timeout: float = 10.0
    ) -> tuple[dict, list[dict]]:
        """Frames up to the answer to ``request_id``; agent requests are answered by ``on_request``."""
        before: list[dict] = []
        deadline = time.monotonic() + timeout
        while True:
            frame = self.next_frame(max(0.01, deadline - time.monotonic()))
            assert frame is not None, f"the agent is gone; {self._why()}"
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


def updates(frames: list[dict], kind: str | None = None) -> list[dict]:
    """The session/update payloads among ``frames`` (of one kind)."""
    out = [f["params"]["update"] for f in frames if f.get("method") == "session/update"]
    return [u for u in out if kind is None or u["sessionUpdate"] == kind]


def agent_text(frames: list[dict]) -> str:
    return "".join(u["content"]["text"] for u in updates(frames, "agent_message_chunk"))
