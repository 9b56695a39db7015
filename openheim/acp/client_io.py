"""File I/O through the ACP client (fs/read_text_file, fs/write_text_file) when it advertised them."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from openheim.acp.util import RpcError
from openheim.errors import ToolExecutionError

if TYPE_CHECKING:
    from openheim.acp.connection import Connection
    from openheim.acp.terminal import Terminals
    from openheim.core.turn_context import CancelToken, TurnContext

FS_TIMEOUT = 300.0


def client_capabilities(caps: object) -> tuple[bool, bool, bool]:
    """(readTextFile, writeTextFile, terminal) from initialize's clientCapabilities."""
    caps = caps if isinstance(caps, dict) else {}
    fs = caps.get("fs")
    if not isinstance(fs, dict):
        fs = {}
    return fs.get("readTextFile") is True, fs.get("writeTextFile") is True, caps.get("terminal") is True


class AcpClientIo:
    """The ClientIo the file tools use: the editor's buffers win over the disk."""

    def __init__(
        self, conn: Connection, session_id: str, can_read: bool, can_write: bool, terminals: Terminals | None = None
    ) -> None:
        self._conn, self._session_id = conn, session_id
        self._can_read, self._can_write = can_read, can_write
        self.terminals = terminals

    @property
    def can_read(self) -> bool:
        return self._can_read

    @property
    def can_write(self) -> bool:
        return self._can_write

    @property
    def can_run_commands(self) -> bool:
        return self.terminals is not None

    def run_command(
        self, command: str, ctx: TurnContext, timeout: float, cap: int, argv: list[str] | None = None
    ) -> str:
        if self.terminals is None:
            raise ToolExecutionError("the editor offered no terminal")
        return self.terminals.run(command, ctx, timeout, cap, argv)

    def read_text_file(self, path: Path, line: int | None, limit: int | None, cancel: CancelToken | None) -> str:
        params: dict = {"sessionId": self._session_id, "path": str(path)}
        if line is not None:
            params["line"] = line
        if limit is not None:
            params["limit"] = limit
        result = self._call("fs/read_text_file", params, cancel, path)
        content = result.get("content") if isinstance(result, dict) else None
        if not isinstance(content, str):
            raise ToolExecutionError(f"the client returned no text for '{path}'")
        return content

    def write_text_file(self, path: Path, content: str, cancel: CancelToken | None) -> None:
        params = {"sessionId": self._session_id, "path": str(path), "content": content}
        self._call("fs/write_text_file", params, cancel, path)

    def _call(self, method: str, params: dict, cancel: CancelToken | None, path: Path) -> object:
        try:
            return self._conn.request(method, params, cancel, FS_TIMEOUT)
        except RpcError as e:
            raise ToolExecutionError(f"the editor could not access '{path}': {e.message}") from None
        except TimeoutError as e:
            raise ToolExecutionError(str(e)) from None
