"""PermissionGate: how a front end approves or rejects a tool call before it runs."""
from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol


class Decision(str, Enum):
    ALLOW_ONCE = "allow_once"
    ALLOW_ALWAYS = "allow_always"
    REJECT_ONCE = "reject_once"
    REJECT_ALWAYS = "reject_always"

    @property
    def allowed(self) -> bool:
        return self in (Decision.ALLOW_ONCE, Decision.ALLOW_ALWAYS)


@dataclass(frozen=True)
class PermissionRequest:
    tool_call_id: str
    tool_name: str
    arguments: str
    subagent: str | None = None


class PermissionGate(Protocol):
    """Asked once per side-effect tool call; may block (the agent worker waits)."""

    def request(self, req: PermissionRequest, cancel: object | None = None) -> Decision: ...


class AllowAll:
    """The library default: every call runs."""

    def request(self, req: PermissionRequest, cancel: object | None = None) -> Decision:
        return Decision.ALLOW_ONCE
