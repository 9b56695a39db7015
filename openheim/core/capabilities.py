"""What the runtime may assume about a tool (plain data every layer shares)."""

from __future__ import annotations

from dataclasses import dataclass

from openheim.records import FrozenRecord, set_field


@dataclass(init=False, repr=False, eq=False)
class ToolCapabilities(FrozenRecord):
    """What the runtime may assume about a tool: read-only tools survive architect mode."""

    read_only: bool = False
    kind: str = "other"  # read, edit, delete, move, search, execute, think, fetch, other
    approval_scope: str = "tool_name"  # or "exact_arguments"

    def __init__(self, read_only: bool = False, kind: str = "other", approval_scope: str = "tool_name") -> None:
        set_field(self, "read_only", read_only)
        set_field(self, "kind", kind)
        set_field(self, "approval_scope", approval_scope)


DEFAULT_CAPABILITIES = ToolCapabilities()
