"""Session modes: ``code`` exposes every tool, ``architect`` only the read-only ones."""

from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from openheim.core.tools import ScopedExecutor
from openheim.errors import InvalidArgument

if TYPE_CHECKING:
    from openheim.core.models import Tool
    from openheim.core.tool_view import ToolView
    from openheim.core.tools import ToolCapabilities, ToolExecutor, ViewContext
    from openheim.core.turn_context import TurnContext


class AgentMode(str, Enum):
    CODE = "code"
    ARCHITECT = "architect"

    @classmethod
    def parse(cls, value: str) -> AgentMode:
        """The mode named ``value``; anything else is an InvalidArgument."""
        try:
            return cls(value)
        except ValueError:
            raise InvalidArgument(f"unknown session mode: {value}") from None


def tools_for_mode(executor: ToolExecutor, mode: AgentMode | str) -> ToolExecutor:
    """The tools a session in ``mode`` may see: all in code mode, only read-only ones in architect."""
    if AgentMode.parse(mode) is AgentMode.CODE:
        return executor
    return ReadOnlyTools(executor)


class ReadOnlyTools:
    """The read-only tools of ``inner`` as they are at each use: a session's MCP tools change as its servers
    come up, and a read-only one that arrives mid-turn is offered from the next request."""

    def __init__(self, inner: ToolExecutor) -> None:
        self.inner = inner

    def _scoped(self) -> ToolExecutor:
        inner = self.inner
        return ScopedExecutor(inner, [t.name for t in inner.definitions() if inner.capabilities(t.name).read_only])

    def names(self) -> list[str]:
        return self._scoped().names()

    def definitions(self) -> list[Tool]:
        return self._scoped().definitions()

    def capabilities(self, name: str) -> ToolCapabilities:
        return self._scoped().capabilities(name)

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        return self._scoped().execute(name, arguments, ctx)

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        return self._scoped().present(name, args, where)
