"""The ToolHandler protocol and the ToolExecutor registry that the agent loop dispatches through."""
from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from openheim.core.models import Tool
from openheim.errors import ToolExecutionError

if TYPE_CHECKING:
    from openheim.core.turn import TurnContext

log = logging.getLogger(__name__)

@dataclass(frozen=True)
class ToolCapabilities:
    """What the runtime may assume about a tool: read-only tools survive architect mode."""

    read_only: bool = False
    kind: str = "other"
    approval_scope: str = "tool_name"  # or "exact_arguments"


DEFAULT_CAPABILITIES = ToolCapabilities()


@runtime_checkable
class ToolHandler(Protocol):
    """A tool the model can call. ``execute`` returns the result text or raises ToolExecutionError."""

    name: str
    description: str
    parameters: dict

    def execute(self, args: dict, ctx: TurnContext) -> str: ...


def capabilities_of(handler: ToolHandler) -> ToolCapabilities:
    return getattr(handler, "capabilities", None) or DEFAULT_CAPABILITIES


def definition_of(handler: ToolHandler) -> Tool:
    return Tool(handler.name, handler.description, handler.parameters)


class ToolExecutor(Protocol):
    """Anything the agent loop can list tools from and dispatch calls to."""

    def names(self) -> list[str]: ...

    def definitions(self) -> list[Tool]: ...

    def capabilities(self, name: str) -> ToolCapabilities: ...

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str: ...


def decode_arguments(arguments: str) -> dict:
    """Arguments text to a dict: blank means no arguments; anything but an object is an error."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except json.JSONDecodeError as e:
        raise ToolExecutionError(f"failed to parse arguments: {e}") from None
    if not isinstance(value, dict):
        raise ToolExecutionError("failed to parse arguments: expected a JSON object")
    return value


class ToolRegistry:
    """Tools by name, listed in sorted order so provider prompt caches stay reusable."""

    def __init__(self, handlers: list[ToolHandler] | None = None) -> None:
        self._handlers: dict[str, ToolHandler] = {}
        for h in handlers or []:
            self.register(h)

    def register(self, handler: ToolHandler) -> None:
        if handler.name in self._handlers:
            log.warning("Tool name collision: %s registered twice; the later one wins", handler.name)
        self._handlers[handler.name] = handler

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def get(self, name: str) -> ToolHandler | None:
        return self._handlers.get(name)

    def snapshot(self) -> ToolRegistry:
        return ToolRegistry([self._handlers[n] for n in self.names()])

    def definitions(self) -> list[Tool]:
        return [definition_of(self._handlers[n]) for n in self.names()]

    def capabilities(self, name: str) -> ToolCapabilities:
        h = self._handlers.get(name)
        return capabilities_of(h) if h else DEFAULT_CAPABILITIES

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        handler = self._handlers.get(name)
        if handler is None:
            raise ToolExecutionError(f"Unknown tool: {name}")
        return handler.execute(decode_arguments(arguments), ctx)

    def __len__(self) -> int:
        return len(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers
