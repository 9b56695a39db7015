"""The ACP server: a reader loop that parses messages and dispatches, a writer thread owning the output.

Only the framing differs between transports: stdio reads newline-delimited lines and writes them back
(``serve_stdio``); a WebSocket carries one JSON-RPC message per frame (``serve_acp`` with a frame sink).
"""

from __future__ import annotations

import json
import logging
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO

from openheim.acp.connection import MAX_LINE_BYTES, Connection, Sink, Writer, read_lines
from openheim.acp.handlers import DEFERRED, Handlers
from openheim.acp.util import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    PARSE_ERROR,
    RpcError,
    error_for,
)
from openheim.errors import OpenheimError

if TYPE_CHECKING:
    from openheim.acp.lazy import LazyClient
    from openheim.client import OpenheimClient

log = logging.getLogger(__name__)

SHUTDOWN_WAIT = 1.0  # seconds running turns get to stop after the input ends


def serve_acp(
    client: OpenheimClient | LazyClient,
    messages: Iterable[bytes | str | None],
    out: Writer | BinaryIO | Sink,
    max_line: int = MAX_LINE_BYTES,
    kill_children: bool = True,
) -> int:
    """Serve one ACP connection until ``messages`` ends; returns 0.

    ``messages`` yields one JSON-RPC payload each (bytes or str; None stands for one that was too long).
    ``out`` is where answers go: a byte stream (newline framing), a Sink called with batches of encoded
    messages (e.g. one WebSocket frame each), or a Writer. ``kill_children`` ends every tool process of
    this process at the end (right for one client per process, not for a server with many).
    """
    return AcpServer(client, messages, out, max_line, kill_children).serve()


def serve_stdio(
    client: OpenheimClient | LazyClient, inp: BinaryIO, out: BinaryIO, max_line: int = MAX_LINE_BYTES
) -> int:
    """`openheim acp`: newline-delimited JSON-RPC on a pair of byte streams."""
    return serve_acp(client, read_lines(inp, max_line), out, max_line)


@dataclass(frozen=True, eq=False)
class Parsed:
    """A message its framing parsed already (a `/ws` envelope's data): dispatched as it is, not parsed again."""

    message: Any


class AcpServer:
    """Serve one ACP client: messages in, a writer thread out, until the input ends.

    ``allow_mcp_commands`` False refuses the stdio MCP servers a client lists in session/new or load
    (a network client must not run commands on this machine).
    """

    def __init__(
        self,
        client: OpenheimClient | LazyClient,
        messages: Iterable[bytes | str | Parsed | None],
        out: Writer | BinaryIO | Sink,
        max_line: int = MAX_LINE_BYTES,
        kill_children: bool = True,
        allow_mcp_commands: bool = True,
    ) -> None:
        self.client = client
        self.messages = messages
        self.max_line = max_line
        self.kill_children = kill_children
        self.writer = out if isinstance(out, Writer) else Writer(out)
        self.conn = Connection(self.writer)
        self.handlers = Handlers(client, self.conn, allow_mcp_commands)
        self._shut_down = False

    def serve(self) -> int:
        """Read and dispatch until the input ends; then cancel what runs, flush and return 0."""
        self.writer.start()
        try:
            for line in self.messages:
                if line is None:
                    self.conn.respond_error(
                        None, RpcError(INVALID_REQUEST, f"message longer than {self.max_line} bytes; refused")
                    )
                    continue
                if isinstance(line, Parsed):
                    self.dispatch(line.message)
                else:
                    self.handle_line(line)
        finally:
            self.shutdown()
        return 0

    def handle_line(self, line: bytes | str) -> None:
        try:
            message = json.loads(line)
        except (ValueError, UnicodeDecodeError) as e:
            self.conn.respond_error(None, RpcError(PARSE_ERROR, f"parse error: {e}"))
            return
        except RecursionError:
            self.conn.respond_error(None, RpcError(PARSE_ERROR, "parse error: nested too deeply"))
            return
        self.dispatch(message)

    def dispatch(self, message: Any) -> None:
        if not isinstance(message, dict):
            kind = "batches are not supported" if isinstance(message, list) else "expected a JSON object"
            self.conn.respond_error(None, RpcError(INVALID_REQUEST, f"invalid request: {kind}"))
            return
        method = message.get("method")
        if method is None:
            if "result" in message or "error" in message:
                self.conn.resolve(message)
            elif "id" in message:
                self.conn.respond_error(_valid_id(message), RpcError(INVALID_REQUEST, "invalid request: no method"))
            return
        if "id" not in message:
            self._notification(method, message.get("params"))
            return
        self._request(message["id"], method, message.get("params"))

    def _notification(self, method: Any, params: Any) -> None:
        if method == "session/cancel" and isinstance(params, dict):
            self.handlers.cancel(params.get("sessionId"))
        else:
            log.debug("ignoring notification %r", method)

    def _request(self, request_id: Any, method: Any, params: Any) -> None:
        if not _is_id(request_id):
            self.conn.respond_error(
                None, RpcError(INVALID_REQUEST, "invalid request: 'id' must be a string or a finite number")
            )
            return
        handler = self.handlers.methods.get(method) if isinstance(method, str) else None
        if handler is None:
            self.conn.respond_error(request_id, RpcError(METHOD_NOT_FOUND, f"method not found: {method}"))
            return
        if params is None:
            params = {}
        if not isinstance(params, dict):
            self.conn.respond_error(request_id, RpcError(INVALID_PARAMS, "'params' must be an object"))
            return
        try:
            result = handler(request_id, params)
        except Exception as e:
            self._log_failure(method, e)
            self.conn.respond_error(request_id, error_for(e))
            return
        if result is not DEFERRED:
            self.conn.respond(request_id, result)

    @staticmethod
    def _log_failure(method: str, error: Exception) -> None:

        if isinstance(error, (RpcError, OpenheimError)):
            log.info("%s failed: %s", method, error)
        else:
            log.exception("%s crashed", method)

    def cancel_prompts(self) -> None:
        """Cancel every running prompt (each is still answered, "cancelled")."""
        self.handlers.cancel_all()

    def shutdown(self, grace: float = SHUTDOWN_WAIT) -> None:
        """Cancel every turn, fail pending client requests, and return once every prompt is answered (or
        ``grace`` seconds passed); then kill children (when this server owns them) and flush the output."""
        from openheim.tools.process import kill_all

        if self._shut_down:
            return
        self._shut_down = True
        runs = self.handlers.cancel_all()
        self.handlers.let_go_all()
        self.conn.close()
        deadline = time.monotonic() + grace
        for run in runs:
            run.wait_answered(max(0.0, deadline - time.monotonic()))
        for run in runs:
            run.wait(max(0.0, deadline - time.monotonic()))
        if self.kill_children:
            kill_all()
        self.writer.close()


def _is_id(value: Any) -> bool:
    """A JSON-RPC id we can echo: a string or a number that JSON can write (not NaN or an infinity)."""
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, (str, int)) and not isinstance(value, bool)


def _valid_id(message: dict) -> Any:
    request_id = message.get("id")
    return request_id if _is_id(request_id) else None
