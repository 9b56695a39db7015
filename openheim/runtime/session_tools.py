"""A session's tool set: the runtime's registry plus the MCP servers the session sees (configured,
its project's trusted ``.mcp.json``, its own), the ready servers' tools listed after the built-ins."""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from openheim.core.tools import LayeredExecutor, ToolRegistry
from openheim.errors import ToolExecutionError

if TYPE_CHECKING:
    from openheim.core.models import Tool
    from openheim.core.tools import (
        ToolCapabilities,
        ToolExecutor,
        ToolView,
        ViewContext,
    )
    from openheim.core.turn_context import CancelToken, TurnContext
    from openheim.mcp.group import Notify, ServerGroup
    from openheim.mcp.prompts import McpPrompt
    from openheim.mcp.server import McpServer
    from openheim.mcp.status import McpServerStatus

log = logging.getLogger(__name__)

GONE = ("failed", "closed", "needs login")  # states whose prompts are not offered
KICK_AFTER = 0.25  # seconds after a turn's tools are fixed: its first model request has been sent by then


class SessionTools:
    """A ToolExecutor whose MCP part follows the servers as they come up (cached per change)."""

    def __init__(self, registry: ToolRegistry, groups: list[ServerGroup]) -> None:
        self.registry = registry
        self.groups = groups
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, ...], ToolExecutor] | None = None
        self._kicker: threading.Timer | None = None

    def for_turn(self, cancel: CancelToken | None = None, notify: Notify | None = None) -> ToolExecutor:
        """Wait (bounded, cancellable, announced through ``notify``) for servers still starting whose tools
        were never seen; servers with a remembered tool list are not waited for. Then the session's live
        tool set: each model request of the turn offers the tools as they are then (a server's live list
        replaces its remembered one as soon as it arrives)."""
        for group in self.groups:
            group.wait_ready(cancel, include_known=False, notify=notify)
        self._kick_soon()
        return self

    def _kick_soon(self) -> None:
        """Servers with a remembered tool list start once the turn's first request is on its way: their
        start (the SDK import above all) would otherwise compete with it for the interpreter."""
        with self._lock:
            if self._kicker is not None:
                return
            self._kicker = threading.Timer(KICK_AFTER, self.kick)
            self._kicker.daemon = True
        self._kicker.start()

    def kick(self) -> None:
        """Start every server not started yet."""
        for group in self.groups:
            group.kick()

    def current(self) -> ToolExecutor:
        versions = tuple(g.version for g in self.groups)
        with self._lock:
            if self._cached is not None and self._cached[0] == versions:
                return self._cached[1]
        handlers: list = [h for g in self.groups for h in g.handlers()]
        _warn_once(handlers)
        if any(s.has_resources for s in self.servers()):
            from openheim.mcp.resources import resource_tools

            handlers += resource_tools(self.servers)
        executor: ToolExecutor = (
            LayeredExecutor(self.registry, ToolRegistry(_unique(handlers))) if handlers else self.registry
        )
        with self._lock:
            self._cached = (versions, executor)
        return executor

    def statuses(self, until: float | None = None) -> list[McpServerStatus]:
        for group in self.groups:
            if until is not None:
                group.wait_ready(until=until)
        return [s for g in self.groups for s in g.statuses()]

    def servers(self) -> list[McpServer]:
        return [s for g in self.groups for s in g.servers]

    def wait_quietly(self, until: float) -> None:
        """Start every server and wait until each has settled or ``until`` (a monotonic time) passed, without
        the notices of a turn's wait (the turn still tells its own)."""
        import time

        self.kick()
        for server in self.servers():
            left = until - time.monotonic()
            if left <= 0:
                return
            server.settled.wait(left)

    def prompts(self) -> list[McpPrompt]:
        """The prompts of the servers that have not failed (as listed when each connected, or remembered)."""
        from openheim.mcp.prompts import prompts_of

        return [p for s in self.servers() if s.state not in GONE for p in prompts_of(s.name, list(s.prompts))]

    def prompt_text(self, prompt: McpPrompt, arguments: dict[str, str], cancel: CancelToken | None = None) -> str:
        """prompts/get of ``prompt`` with ``arguments``, as the text of a user message (ToolExecutionError when
        the server fails)."""
        from openheim.mcp.prompts import get_prompt, prompt_text

        server = next((s for s in self.servers() if s.name == prompt.server), None)
        if server is None:
            raise ToolExecutionError(f"MCP server '{prompt.server}' is not connected to this session")
        result = server.request(
            f"prompts/get of '{prompt.name}'", lambda session: get_prompt(session, prompt.name, arguments), cancel
        )
        text = prompt_text(result)
        if not text.strip():
            raise ToolExecutionError(f"MCP prompt {prompt.ref} came back empty; nothing was sent")
        return text

    # --- ToolExecutor ------------------------------------------------------------------------

    def names(self) -> list[str]:
        return self.current().names()

    def definitions(self) -> list[Tool]:
        return self.current().definitions()

    def capabilities(self, name: str) -> ToolCapabilities:
        return self.current().capabilities(name)

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        return self.current().execute(name, arguments, ctx)

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        return self.current().present(name, args, where)


_warned: set[str] = set()


def _warn_once(handlers: list) -> None:
    """The warning about too many or too big MCP tools, once per process for each wording."""
    from openheim.mcp.group import weight_warning

    line = weight_warning(handlers)
    if line is not None and line not in _warned:
        _warned.add(line)
        log.warning("%s", line)


def _unique(handlers: list) -> list:
    """The first handler of each name (two servers whose names sanitise alike cannot both win)."""
    seen: dict[str, object] = {}
    for h in handlers:
        seen.setdefault(h.name, h)
    return list(seen.values())
