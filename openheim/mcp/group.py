"""Servers started together (a runtime's configured ones, a project's, a session's) and waiting for them."""
from __future__ import annotations

import concurrent.futures
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from openheim.mcp.server import CLOSE_LIMIT, McpServer

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.core.turn_context import CancelToken
    from openheim.mcp.bridge import Bridge
    from openheim.mcp.status import McpServerStatus
    from openheim.mcp.tool import McpTool


class ServerGroup:
    """Start all at once, wait for them with a bounded patience, offer the tools of the ready ones."""

    def __init__(self, configs: list[McpServerConfig], bridge: Bridge | NoBridge, log_dir: Path,
                 startup_timeout: float) -> None:
        self.startup_timeout = startup_timeout
        self.version = 0  # bumped whenever a server's state or tools change
        self._cond = threading.Condition()
        # a group without configs is the only one given a NoBridge, so every server gets a real Bridge
        self.servers = [McpServer(c, cast("Bridge", bridge), log_dir, self._changed) for c in configs]
        self.closed = False

    def start(self) -> ServerGroup:
        for server in self.servers:
            server.start()
        return self

    def names(self) -> set[str]:
        return {s.name for s in self.servers}

    def _changed(self) -> None:
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def wait_ready(self, cancel: CancelToken | None = None, until: float | None = None) -> None:
        """Wait while some server is still starting and within its allowance: ``until`` (a monotonic
        time) if given, else its own start time plus ``startup_timeout``. A cancel ends the wait."""
        remove = cancel.on_cancel(self._changed) if cancel is not None else (lambda: None)
        try:
            with self._cond:
                while not (cancel is not None and cancel.cancelled):
                    now = time.monotonic()
                    limits = [until if until is not None else s.started_at + self.startup_timeout
                              for s in self.servers if not s.settled.is_set()]
                    live = [limit for limit in limits if limit > now]
                    if not live:
                        return
                    self._cond.wait(min(live) - now)
        finally:
            remove()

    def handlers(self) -> list[McpTool]:
        return [tool for server in self.servers for tool in list(server.tools)]

    def statuses(self) -> list[McpServerStatus]:
        return [s.status() for s in self.servers]

    def close_async(self) -> list[concurrent.futures.Future]:
        """Ask every server to stop; the futures end when they have."""
        if self.closed:
            return []
        self.closed = True
        return [s.close_async() for s in self.servers]

    def close(self, timeout: float = CLOSE_LIMIT) -> None:
        """Stop every server, waiting at most ``timeout``; what is left then is killed."""
        finish(self.close_async(), self.servers, timeout)


def finish(futures: list[concurrent.futures.Future], servers: list[McpServer], timeout: float) -> None:
    """Wait for closes; SIGKILL the process groups of servers that did not finish in time."""
    _done, pending = concurrent.futures.wait(futures, timeout=timeout)
    if pending:
        for server in servers:
            server.kill_leftovers()


class NoBridge:
    """Stands in for the bridge of a group with no servers, so an empty group never starts a thread."""

    import_error = None
