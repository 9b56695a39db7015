"""A stdio server's log, ``{data_dir}/logs/mcp-NAME.log``: its stderr, and openheim's notes about what it sent
on stdout that was not a message. Rotated by size while it runs (the current file and one older one)."""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import BinaryIO

log = logging.getLogger(__name__)

ROTATE_BYTES = 10_000_000  # per file; with the one rotated file, at most about 20 MB per server
_UNSAFE_FILE_CHARS = re.compile(r"[^A-Za-z0-9_.-]")


def log_path(log_dir: Path, name: str) -> Path:
    return log_dir / f"mcp-{_UNSAFE_FILE_CHARS.sub('_', name)}.log"


class ServerLog:
    """Append-only bytes; past ``limit`` the file becomes ``.log.1`` (replacing the older one)."""

    def __init__(self, path: Path, limit: int = ROTATE_BYTES) -> None:
        self.path = path
        self.limit = limit
        self._file: BinaryIO | None = None
        self._size = 0
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._open()
        except OSError as e:
            log.warning("cannot open %s (%s); this MCP server's stderr is discarded", path, e.strerror or e)

    def _open(self) -> None:
        handle = open(self.path, "ab")  # noqa: SIM115 (kept open for the server's lifetime)
        self._file, self._size = handle, handle.tell()

    def write(self, data: bytes) -> None:
        if self._file is None or not data:
            return
        try:
            if self._size + len(data) > self.limit and self._size > 0:
                self._file.close()
                os.replace(self.path, self.path.with_name(self.path.name + ".1"))
                self._open()
            self._file.write(data)
            self._file.flush()
            self._size += len(data)
        except OSError:
            pass

    def note(self, text: str) -> None:
        """A line of openheim's own, marked as such."""
        self.write(f"--- openheim {time.strftime('%Y-%m-%d %H:%M:%S')}: {text}\n".encode("utf-8", "replace"))

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def opened_log(path: Path, name: str, command: str | None) -> ServerLog:
    """A stdio server's log, {data_dir}/logs/mcp-{name}.log, where its stderr goes (never the terminal or ACP's
    stdout), opened with a line saying which server starts."""
    server_log = ServerLog(path)
    server_log.note(f"starting '{name}' ({command})")
    return server_log
