"""What the runtime may assume about a tool (plain data every layer shares)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCapabilities:
    """What the runtime may assume about a tool: read-only tools survive architect mode."""

    read_only: bool = False
    kind: str = "other"  # read, edit, delete, move, search, execute, think, fetch, other
    approval_scope: str = "tool_name"  # or "exact_arguments"


DEFAULT_CAPABILITIES = ToolCapabilities()
