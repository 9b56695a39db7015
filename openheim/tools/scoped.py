"""ScopedExecutor: a view of a tool executor that exposes only an allow-list of tools."""
from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from openheim.errors import ToolExecutionError
from openheim.tools.registry import DEFAULT_CAPABILITIES, ToolCapabilities, ToolExecutor

if TYPE_CHECKING:
    from openheim.core.models import Tool
    from openheim.core.turn import TurnContext


class ScopedExecutor:
    """Lists and runs only the allowed tools of ``inner``; other calls get a clear tool error."""

    def __init__(self, inner: ToolExecutor, allowed: Iterable[str]) -> None:
        self.inner = inner
        present = {t.name for t in inner.definitions()}
        self.allowed = frozenset(name for name in allowed if name in present)

    def names(self) -> list[str]:
        return sorted(self.allowed)

    def definitions(self) -> list[Tool]:
        return [t for t in self.inner.definitions() if t.name in self.allowed]

    def capabilities(self, name: str) -> ToolCapabilities:
        return self.inner.capabilities(name) if name in self.allowed else DEFAULT_CAPABILITIES

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        if name not in self.allowed:
            available = ", ".join(self.names()) or "(none)"
            raise ToolExecutionError(f"Tool '{name}' is not available to this agent. Available tools: {available}")
        return self.inner.execute(name, arguments, ctx)

    def snapshot(self) -> ScopedExecutor:
        inner = self.inner.snapshot() if hasattr(self.inner, "snapshot") else self.inner
        return ScopedExecutor(inner, self.allowed)

    def __len__(self) -> int:
        return len(self.allowed)

    def __contains__(self, name: object) -> bool:
        return name in self.allowed
