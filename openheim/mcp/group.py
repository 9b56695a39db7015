"""Servers started together (a runtime's configured ones, a project's, a session's) and waiting for them."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.mcp.framing import DEFAULT_MAX_MESSAGE
from openheim.mcp.server import CLOSE_LIMIT, McpServer

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.core.turn_context import CancelToken
    from openheim.mcp.bridge import Bridge
    from openheim.mcp.status import McpServerStatus
    from openheim.mcp.tool import McpTool

log = logging.getLogger(__name__)

Notify = Callable[[str, str], None]  # (one line, level: "info" or "warning")


class ServerGroup:
    """Start all at once, wait for them with a bounded patience, offer the tools of the ready ones."""

    def __init__(
        self,
        configs: list[McpServerConfig],
        bridge: Callable[[], Bridge],
        log_dir: Path,
        startup_timeout: float,
        data_dir: Path | None = None,
        max_message: int = DEFAULT_MAX_MESSAGE,
    ) -> None:
        self.startup_timeout = startup_timeout
        self.version = 0  # bumped whenever a server's state or tools change
        self._cond = threading.Condition()
        self.servers = [
            McpServer(c, bridge, log_dir, self._changed, data_dir, startup_timeout, max_message) for c in configs
        ]
        self.closed = False
        self._announced: set[str] = set()  # servers whose wait (or give-up) was already announced

    def start(self, defer_known: bool = False) -> ServerGroup:
        """Start the servers; with ``defer_known``, those whose tool list is remembered wait for ``kick``
        (their remembered tools are offered meanwhile, and a call to one starts its server)."""
        for server in self.servers:
            if not (defer_known and server.known):
                server.start()
        return self

    def kick(self) -> None:
        """Start the servers that are not started yet."""
        for server in self.servers:
            server.start()

    def names(self) -> set[str]:
        return {s.name for s in self.servers}

    def _changed(self) -> None:
        with self._cond:
            self.version += 1
            self._cond.notify_all()

    def wait_ready(
        self,
        cancel: CancelToken | None = None,
        until: float | None = None,
        include_known: bool = True,
        notify: Notify | None = None,
    ) -> None:
        """Wait while some server is still starting and within its allowance: ``until`` (a monotonic
        time) if given, else its own start time plus ``startup_timeout``. A cancel ends the wait.
        Without ``include_known``, servers whose last tool list is remembered are not waited for (their
        tools are offered meanwhile); ``notify`` gets the one-line notices of a wait (level ``info``) and of a
        give-up (level ``warning``); without it they are logged."""
        if include_known:
            self.kick()
        waiting = [s for s in self.servers if (include_known or not s.known) and not s.settled.is_set()]
        if not waiting:
            return
        self._announce([s.name for s in waiting], "starting MCP servers: {}", "info", notify)
        self._wait_for(waiting, cancel, until)
        if until is None and not (cancel is not None and cancel.cancelled):
            for server in waiting:
                if not server.settled.is_set():
                    server.gave_up()
                    self._announce(
                        [server.name],
                        f"MCP server '{{}}' not ready after {self.startup_timeout:g} s; going on without its tools",
                        "warning",
                        notify,
                        key="late:",
                    )

    def _wait_for(self, waiting: list[McpServer], cancel: CancelToken | None, until: float | None) -> None:
        """Until each of ``waiting`` settled or ran out of its allowance (see wait_ready), or a cancel."""
        remove = cancel.on_cancel(self._changed) if cancel is not None else (lambda: None)
        try:
            with self._cond:
                while not (cancel is not None and cancel.cancelled):
                    now = time.monotonic()
                    limits = [
                        until if until is not None else s.started_at + self.startup_timeout
                        for s in waiting
                        if not s.settled.is_set()
                    ]
                    live = [limit for limit in limits if limit > now]
                    if not live:
                        break
                    self._cond.wait(min(live) - now)
        finally:
            remove()

    def _announce(self, names: list[str], template: str, level: str, notify: Notify | None, key: str = "") -> None:
        """Say ``template`` about the servers not yet announced (once each per group)."""
        with self._cond:
            fresh = [n for n in names if key + n not in self._announced]
            self._announced.update(key + n for n in fresh)
        if not fresh:
            return
        line = template.format(", ".join(fresh))
        if notify is not None:
            notify(line, level)
        else:
            log.warning("%s", line)

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


MANY_TOOLS = 128  # more MCP tools than this in one request gets a warning
BIG_SCHEMA = 64 << 10  # bytes: a tool definition larger than this gets a warning


def weight_warning(tools: list[McpTool]) -> str | None:
    """One line when the MCP tools sent with every request are too many or too big, naming the servers."""
    problems = []
    if len(tools) > MANY_TOOLS:
        counts: dict[str, int] = {}
        for tool in tools:
            counts[tool.server.name] = counts.get(tool.server.name, 0) + 1
        named = ", ".join(f"{name} ({n})" for name, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        problems.append(f"{len(tools)} MCP tools (over {MANY_TOOLS}) are sent with every request: {named}")
    big = sorted({t.server.name for t in tools if len(json.dumps([t.description, t.parameters])) > BIG_SCHEMA})
    if big:
        problems.append(
            f"MCP tools over {BIG_SCHEMA >> 10} KiB each are sent with every request, from: " + ", ".join(big)
        )
    if not problems:
        return None
    return "; ".join(problems) + " (they cost tokens every time; consider fewer servers)"


def finish(futures: list[concurrent.futures.Future], servers: list[McpServer], timeout: float) -> None:
    """Wait for closes; SIGKILL the process groups of servers that did not finish in time."""
    _, pending = concurrent.futures.wait(futures, timeout=timeout)
    if pending:
        for server in servers:
            server.kill_leftovers()
