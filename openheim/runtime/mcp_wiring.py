"""How MCP servers reach sessions: each session's tool set is the registry plus the configured servers,
its project's trusted ``.mcp.json`` (shared by the sessions rooted there) and its own servers. The hub,
and with it the bridge thread and the SDK, exists only once some server does."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.errors import NotFound
from openheim.runtime.session_tools import SessionTools

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.core.tools import ToolRegistry
    from openheim.core.turn_context import CancelToken
    from openheim.mcp.hub import McpHub
    from openheim.mcp.project import KeyPolicy
    from openheim.mcp.prompts import McpPrompt
    from openheim.mcp.status import McpServerStatus
    from openheim.runtime.live import SessionState

PROJECT_FILE = ".mcp.json"


class McpWiring:
    def __init__(
        self,
        registry: ToolRegistry,
        data_dir: Path,
        startup_timeout: float,
        max_message: int = 8 << 20,
        keys: Callable[[], KeyPolicy] | None = None,
    ) -> None:
        self.registry = registry
        self.keys = keys  # made with the hub, so a runtime without MCP servers never imports openheim.mcp
        self.data_dir = data_dir
        self.startup_timeout = startup_timeout
        self.max_message = max_message
        self.hub: McpHub | None = None
        self._lock = threading.Lock()
        self._shared: SessionTools | None = None

    def start(self, configured: list[McpServerConfig]) -> None:
        """Start the configured servers (in the background); they serve every session."""
        from openheim.mcp.hub import McpHub
        from openheim.tools.process import deny_inspection

        deny_inspection()  # before any server process exists: none may read our environment or memory
        with self._lock:
            self.hub = McpHub(configured, self.data_dir, self.startup_timeout, self.max_message, self._keys())

    def _keys(self) -> KeyPolicy | None:
        return self.keys() if self.keys is not None else None

    def _hub(self) -> McpHub:
        with self._lock:
            if self.hub is None:
                from openheim.mcp.hub import McpHub
                from openheim.tools.process import deny_inspection

                deny_inspection()
                self.hub = McpHub([], self.data_dir, self.startup_timeout, self.max_message, self._keys())
            return self.hub

    def shared_tools(self) -> SessionTools | None:
        """The registry plus the configured servers (None when there are none)."""
        hub = self.hub
        if hub is None or hub.configured is None:
            return None
        with self._lock:
            if self._shared is None:
                self._shared = SessionTools(self.registry, [hub.configured])
            return self._shared

    def attach(self, session: SessionState, root: Path, servers: list[McpServerConfig]) -> None:
        """Give ``session`` (sandbox root ``root``) its tool set and its own ``servers``, replacing any
        earlier ones; without a project file or own servers it shares the runtime's tool set."""
        has_project = (root / PROJECT_FILE).is_file()
        old = session.releases
        session.releases, session.mcp_servers = [], list(servers)
        session.tools = self.shared_tools()
        if has_project or servers:
            hub = self._hub()
            taken, extra = hub.configured_names(), []
            project, _ = hub.project(root) if has_project else (None, None)
            if project is not None:
                extra.append(project)
                taken |= project.names()
                session.releases.append(lambda: hub.release(project))
            if servers:
                own = hub.group([replace(s, source="session", cwd=s.cwd or session.cwd) for s in servers], taken)
                extra.append(own)
                session.releases.append(lambda: hub.close_group(own))
            if extra:
                session.tools = SessionTools(self.registry, [hub.configured, *extra] if hub.configured else extra)
        for release in old:  # after the new ones took hold, so a shared project group is not restarted
            release()

    def statuses(self, session: SessionState | None, wait: float, root: Path | None) -> list[McpServerStatus]:
        """A session's servers, or the configured ones plus ``root``'s project file; waiting up to ``wait``."""
        until = time.monotonic() + wait if wait > 0 else None
        if session is not None:
            return session.tools.statuses(until) if isinstance(session.tools, SessionTools) else []
        statuses = self.hub.statuses(until) if self.hub is not None else []
        if root is not None and (root / PROJECT_FILE).is_file():
            statuses += self._project_statuses(root, until)
        return statuses

    def prompts(self, session: SessionState, wait: float = 0.0) -> list[McpPrompt]:
        """The prompts of a session's servers, waiting up to ``wait`` seconds for those still starting."""
        tools = session.tools
        if not isinstance(tools, SessionTools):
            return []
        if wait > 0:
            tools.wait_quietly(time.monotonic() + wait)
        return tools.prompts()

    def expand_prompt(self, session: SessionState, name: str, arguments: str, cancel: CancelToken | None = None) -> str:
        """The user message that MCP prompt ``name`` (``server/name`` or ``server.name``) makes with ``arguments``
        (``key=value ...``): NotFound, InvalidArgument or ToolExecutionError, each in one line."""
        from openheim.mcp.prompts import find, parse_arguments

        prompts = self.prompts(session)
        prompt = find(prompts, name)
        if prompt is None or not isinstance(session.tools, SessionTools):
            known = ", ".join(p.ref for p in prompts) or "none"
            raise NotFound(f"unknown MCP prompt '{name}' (this session's prompts: {known})")
        return session.tools.prompt_text(prompt, parse_arguments(prompt, arguments), cancel)

    def _project_statuses(self, root: Path, until: float | None) -> list[McpServerStatus]:
        hub = self._hub()
        group, found = hub.project(root, notify=False)
        if group is None:
            taken = hub.configured_names()
            return [s for s in found.untrusted_statuses() if s.name not in taken] if found is not None else []
        try:
            if until is not None:
                group.wait_ready(until=until)
            return group.statuses()
        finally:
            hub.release(group)

    def close(self, wait: bool = True) -> None:
        """Stop every server; without ``wait`` only start stopping them (for a process about to exit)."""
        if self.hub is not None:
            self.hub.close(wait=wait)
