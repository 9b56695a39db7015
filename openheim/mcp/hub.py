"""The MCP servers of one runtime: its configured ones, each project's (shared by the sessions in that
project) and each session's own, all on one bridge thread that starts with the first server."""

from __future__ import annotations

import atexit
import concurrent.futures
import logging
import threading
import time
import weakref
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.core.child_env import child_environ
from openheim.mcp.bridge import Bridge
from openheim.mcp.framing import DEFAULT_MAX_MESSAGE
from openheim.mcp.group import ServerGroup, finish
from openheim.mcp.project import read_project
from openheim.mcp.server import CLOSE_LIMIT

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.mcp.project import KeyPolicy, ProjectFile
    from openheim.mcp.status import McpServerStatus

log = logging.getLogger(__name__)


@dataclass
class _Shared:
    group: ServerGroup
    users: int = 0


class McpHub:
    def __init__(
        self,
        configured: list[McpServerConfig],
        data_dir: Path,
        startup_timeout: float,
        max_message: int = DEFAULT_MAX_MESSAGE,
        keys: KeyPolicy | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.keys = keys
        self.max_message = max_message
        self.log_dir = data_dir / "logs"
        self.startup_timeout = startup_timeout
        self._configs = list(configured)
        self._lock = threading.RLock()
        self._bridge: Bridge | None = None
        self._groups: list[ServerGroup] = []
        self._projects: dict[tuple[str, str], _Shared] = {}
        self._noticed: set[tuple[str, str]] = set()
        self.closed = False
        self.configured: ServerGroup | None = self.group(self._configs) if self._configs else None
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            hub = ref()
            if hub is not None:
                hub.close()

        atexit.register(close_at_exit)

    def bridge(self) -> Bridge:
        with self._lock:
            if self._bridge is None:
                self._bridge = Bridge()
            return self._bridge

    def group(
        self, configs: list[McpServerConfig], taken: Collection[str] = frozenset(), defer_known: bool = True
    ) -> ServerGroup:
        """A started group of ``configs``, leaving out names already ``taken`` (configured names win);
        servers with a remembered tool list start on ``ServerGroup.kick`` unless not ``defer_known``."""
        kept = []
        for cfg in configs:
            if cfg.name in taken:
                log.info(
                    "MCP server '%s' from %s is not started: a server of that name is already configured",
                    cfg.name,
                    cfg.source,
                )
                continue
            kept.append(cfg)
        group = ServerGroup(kept, self.bridge, self.log_dir, self.startup_timeout, self.data_dir, self.max_message)
        with self._lock:
            if self.closed:
                raise RuntimeError("the MCP hub is closed")
            self._groups.append(group)
        return group.start(defer_known)

    def configured_names(self) -> set[str]:
        return self.configured.names() if self.configured else set()

    # --- projects -------------------------------------------------------------------------

    def project(self, root: Path, notify: bool = True) -> tuple[ServerGroup | None, ProjectFile | None]:
        """The shared group of ``root``'s trusted ``.mcp.json`` (one more user); else None and the file."""
        found = read_project(root, self.data_dir, self.keys)
        if found is None:
            return None, None
        for problem in found.problems:
            log.warning("%s", problem)
        if not found.trusted:
            key = (str(found.path), found.sha256)
            if notify and key not in self._noticed and found.servers:
                self._noticed.add(key)
                log.warning("%s", found.notice())
            return None, found
        key = (str(found.path), found.sha256)
        with self._lock:
            shared = self._projects.get(key)
            if shared is None:
                shared = self._projects[key] = _Shared(
                    self.group(list(found.servers.values()), self.configured_names())
                )
            shared.users += 1
        return shared.group, found

    def release(self, group: ServerGroup) -> None:
        """One user fewer of a project group; the last one closes it (in the background)."""
        with self._lock:
            key = next((k for k, shared in self._projects.items() if shared.group is group), None)
            if key is None:
                return
            shared = self._projects[key]
            shared.users -= 1
            if shared.users > 0:
                return
            del self._projects[key]
        self.close_group(group)

    def close_group(self, group: ServerGroup) -> list[concurrent.futures.Future]:
        """Stop a group's servers in the background and forget it."""
        with self._lock:
            if group in self._groups:
                self._groups.remove(group)
        return group.close_async()

    # --- status and shutdown -------------------------------------------------------------------

    def statuses(self, until: float | None = None) -> list[McpServerStatus]:
        if self.configured is None:
            return []
        if until is not None:
            self.configured.wait_ready(until=until)
        return self.configured.statuses()

    def close(self, timeout: float = CLOSE_LIMIT, wait: bool = True) -> None:
        """Stop every server of every group (in parallel; each process ends) and the bridge thread; idempotent.
        Without ``wait`` (a process about to exit), the closes start and this returns at once: the servers see
        their stdin close when the process ends, and a detached watchdog kills what is left of them later."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            groups, bridge = list(self._groups), self._bridge
        servers = [s for g in groups for s in g.servers]
        futures: list[concurrent.futures.Future] = []
        for group in groups:
            futures.extend(group.close_async())
        if not wait:
            reap_later([pid for s in servers for pid in s.pids()])
            return
        started = time.monotonic()
        try:
            finish(futures, servers, timeout)
        except BaseException:  # a second Ctrl-C while waiting: no time for manners, but no orphans either
            for server in servers:
                server.kill_leftovers()
            raise
        if bridge is not None:
            bridge.stop(max(0.5, timeout - (time.monotonic() - started)))


REAP_AFTER = 1  # seconds a server gets to exit on its stdin's EOF; then SIGTERM, and SIGKILL a second later


def reap_later(pids: list[int]) -> None:
    """A detached watchdog that ends the servers' process groups the way a close does (EOF, grace, SIGTERM,
    SIGKILL), after this process is gone (the groups of servers that exited by then are empty)."""
    if not pids:
        return
    import subprocess

    groups = " ".join(f"-{int(pid)}" for pid in pids)
    script = f"sleep {REAP_AFTER}; kill -TERM {groups} 2>/dev/null; sleep 1; kill -KILL {groups} 2>/dev/null"
    try:
        subprocess.Popen(
            ["/bin/sh", "-c", script],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            env=child_environ(),
        )
    except OSError:
        pass  # no shell to wait with: the servers still see their stdin close when this process ends
