"""A session's tool set: the runtime's registry plus the MCP servers the session sees (configured,
its project's trusted ``.mcp.json``, its own), the ready servers' tools listed after the built-ins."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from openheim.core.tools import LayeredExecutor, ToolRegistry

if TYPE_CHECKING:
    from openheim.core.models import Tool
    from openheim.core.tools import (
        ToolCapabilities,
        ToolExecutor,
        ToolView,
        ViewContext,
    )
    from openheim.core.turn_context import CancelToken, TurnContext
    from openheim.mcp.group import ServerGroup
    from openheim.mcp.status import McpServerStatus


class SessionTools:
    """A ToolExecutor whose MCP part follows the servers as they come up (cached per change)."""

    def __init__(self, registry: ToolRegistry, groups: list[ServerGroup]) -> None:
        self.registry = registry
        self.groups = groups
        self._lock = threading.Lock()
        self._cached: tuple[tuple[int, ...], ToolExecutor] | None = None

    def for_turn(self, cancel: CancelToken | None = None) -> ToolExecutor:
        """Wait (bounded, cancellable) for servers still starting, then a fixed tool set for one turn."""
        for group in self.groups:
            group.wait_ready(cancel)
        return self.current()

    def current(self) -> ToolExecutor:
        versions = tuple(g.version for g in self.groups)
        with self._lock:
            if self._cached is not None and self._cached[0] == versions:
                return self._cached[1]
        handlers = [h for g in self.groups for h in g.handlers()]
        executor: ToolExecutor = LayeredExecutor(self.registry, ToolRegistry(_unique(handlers))) \
            if handlers else self.registry
        with self._lock:
            self._cached = (versions, executor)
        return executor

    def statuses(self, until: float | None = None) -> list[McpServerStatus]:
        for group in self.groups:
            if until is not None:
                group.wait_ready(until=until)
        return [s for g in self.groups for s in g.statuses()]

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


def _unique(handlers: list) -> list:
    """The first handler of each name (two servers whose names sanitise alike cannot both win)."""
    seen: dict[str, object] = {}
    for h in handlers:
        seen.setdefault(h.name, h)
    return list(seen.values())
