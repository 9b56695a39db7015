"""Session modes: ``code`` exposes every tool, ``architect`` only the read-only ones."""
from __future__ import annotations

from enum import Enum
from typing import TYPE_CHECKING

from openheim.errors import InvalidArgument

if TYPE_CHECKING:
    from openheim.core.tools import ToolExecutor


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
    from openheim.core.tools import ScopedExecutor

    if AgentMode.parse(mode) is AgentMode.CODE:
        return executor
    names = [t.name for t in executor.definitions() if executor.capabilities(t.name).read_only]
    return ScopedExecutor(executor, names)
