"""A project's ``.mcp.json`` (in the sandbox root): its servers, and whether the user trusts it."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from openheim.config.bounded_read import read_bounded
from openheim.config.mcp_json import parse_mcp_json, variables_read
from openheim.config.schema import McpServerConfig
from openheim.errors import ConfigError
from openheim.mcp import trust
from openheim.mcp.status import McpServerStatus

log = logging.getLogger(__name__)

PROJECT_FILE = ".mcp.json"
MAX_PROJECT_BYTES = 1 << 20


@dataclass
class ProjectFile:
    path: Path  # the real path of the file
    sha256: str
    trust: str  # trusted | changed | untrusted
    servers: dict[str, McpServerConfig] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    changed_file: str | None = None  # a file its servers run that changed since it was trusted

    @property
    def trusted(self) -> bool:
        return self.trust == "trusted"

    def notice(self) -> str:
        """The one line that says why the file's servers are not used and how to use them."""
        names = ", ".join(self.servers) or "none usable"
        how = f"run `openheim mcp trust {self.path}` to use them (they run commands on this machine)"
        if self.changed_file is not None:
            return (
                f"{self.changed_file}, which an MCP server of {self.path} runs, changed since you trusted it, so "
                f"its MCP servers ({names}) are not used; {how}"
            )
        if self.trust == "changed":
            return f"{self.path} changed since you trusted it, so its MCP servers ({names}) are not used; {how}"
        return f"{self.path} lists MCP servers ({names}) that are not used until you trust the file; {how}"

    def untrusted_statuses(self) -> list[McpServerStatus]:
        error = (
            "changed since trusted" if self.trust == "changed" else "not trusted"
        ) + f": run `openheim mcp trust {self.path}`"
        return [
            McpServerStatus(
                name=s.name,
                transport=s.transport,
                source="project",
                state="untrusted",
                connected=False,
                tool_count=0,
                error=error,
                command=s.command if s.transport == "stdio" else None,
            )
            for s in self.servers.values()
        ]


@dataclass(frozen=True)
class KeyPolicy:
    """Which variables hold provider keys (the configured ``env_var``s and any ``*_API_KEY``), and which a
    project server may read all the same (``mcp_project_key_vars`` in the user's config)."""

    key_vars: frozenset[str] = frozenset()
    allowed: dict[str, list[str]] = field(default_factory=dict)

    def is_key(self, var: str) -> bool:
        return var in self.key_vars or var.endswith("_API_KEY")

    def refused(self, name: str, entry: object) -> list[str]:
        """The key variables ``entry`` (server ``name``) reads without the user's leave."""
        reads = {v for names in variables_read(entry).values() for v in names}
        return sorted(v for v in reads if self.is_key(v) and v not in self.allowed.get(name, []))


def read_project(root: Path, data_dir: Path, keys: KeyPolicy | None = None) -> ProjectFile | None:
    """The ``.mcp.json`` directly in ``root``, or None when there is none (or it cannot be read). A server
    that reads a provider key variable without the user's leave is left out with a problem line."""
    path = root / PROJECT_FILE
    try:
        raw = read_bounded(path, MAX_PROJECT_BYTES)  # a repository's FIFO or device never hangs a start
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None
    except OSError as e:
        log.warning("cannot read %s: %s", path, e.strerror or e)
        return None
    real = trust.real_path(path)
    sha = trust.digest(raw)
    state, changed = trust.check_detail(data_dir, real, sha)
    found = ProjectFile(real, sha, state, changed_file=changed)
    try:
        found.servers, found.problems = parse_mcp_json(raw.decode("utf-8"), str(real))
    except UnicodeDecodeError:
        found.problems = [f"{real} is not valid UTF-8 text"]
    except ConfigError as e:
        found.problems = [e.message]
    for server in found.servers.values():
        server.source, server.cwd = "project", real.parent
    if keys is not None and found.servers:
        _refuse_key_readers(found, raw, keys)
    return found


def _refuse_key_readers(found: ProjectFile, raw: bytes, keys: KeyPolicy) -> None:
    import json

    try:
        entries = json.loads(raw).get("mcpServers") or {}
    except (ValueError, AttributeError):
        return
    for name in list(found.servers):
        refused = keys.refused(name, entries.get(name))
        if refused:
            del found.servers[name]
            found.problems.append(
                f"MCP server '{name}' of {found.path} is not started: it reads {', '.join(refused)}, which holds a "
                f"provider key; to allow it, add {name} = {json.dumps(refused)} under [mcp_project_key_vars] in "
                "your config.toml"
            )
