"""The tool contract the agent loop runs on: handlers, executors, capabilities and how a call is shown."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast, runtime_checkable

from openheim.core.capabilities import DEFAULT_CAPABILITIES, ToolCapabilities
from openheim.core.models import Tool
from openheim.core.tool_args import decode_arguments, parse_arguments
from openheim.errors import ToolExecutionError

if TYPE_CHECKING:
    from openheim.core.tool_view import TITLE_CHARS, DiffPreview, Location, ToolView, short
    from openheim.core.turn_context import CancelToken, ClientIo, TurnContext

__all__ = [
    "DEFAULT_CAPABILITIES",
    "TITLE_CHARS",
    "BaseTool",
    "DiffPreview",
    "Location",
    "ToolCapabilities",
    "ToolExecutor",
    "ToolHandler",
    "ToolRegistry",
    "ToolView",
    "ViewContext",
    "decode_arguments",
    "parse_arguments",
    "short",
]

log = logging.getLogger(__name__)
_VIEWS = frozenset({"TITLE_CHARS", "DiffPreview", "Location", "ToolView", "short"})


def __getattr__(name: str) -> Any:
    """How a call is shown (core.tool_view) loads with the first call to show, still importable from here."""
    if name in _VIEWS:
        from openheim.core import tool_view

        return getattr(tool_view, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass(frozen=True)
class ViewContext:
    """What a presentation hook may consult: the session cwd, the client's buffers, the turn's cancel token."""

    cwd: Path
    client_io: ClientIo | None = None
    cancel: CancelToken | None = None
    with_diff: bool = True  # reading the old text for a diff preview costs I/O; history replays skip it
    root: Path | None = None  # the sandbox root (default: cwd); a preview never reads outside it

    def absolute(self, path: str) -> str:
        p = Path(path).expanduser()
        return str(p if p.is_absolute() else (self.cwd / p))


# --- handlers and executors -------------------------------------------------------------


@runtime_checkable
class ToolHandler(Protocol):
    """A tool the model can call. ``execute`` returns the result text or raises ToolExecutionError."""

    name: str
    description: str
    parameters: dict
    capabilities: ToolCapabilities

    def execute(self, args: dict, ctx: TurnContext) -> str: ...

    def present(self, args: dict | None, where: ViewContext) -> ToolView: ...


class BaseTool:
    """Defaults for a ToolHandler: no special capabilities, the tool's name as the title."""

    name: str = ""
    description: str = ""
    parameters: dict = {"type": "object", "properties": {}}
    capabilities: ToolCapabilities = DEFAULT_CAPABILITIES

    def execute(self, args: dict, ctx: TurnContext) -> str:
        raise NotImplementedError

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        from openheim.core.tool_view import ToolView

        return ToolView(self.name, self.capabilities.kind)


_HANDLER_MEMBERS = ("name", "description", "parameters", "capabilities", "execute", "present")


def check_handler(handler: object) -> ToolHandler:
    """``handler`` if it has every ToolHandler member, else a TypeError naming what is missing."""
    missing = [m for m in _HANDLER_MEMBERS if not hasattr(handler, m)]
    if missing:
        raise TypeError(
            f"{type(handler).__name__} is not a ToolHandler: it lacks {', '.join(missing)}; "
            "subclass openheim.BaseTool or use the @openheim.tool decorator"
        )
    return cast("ToolHandler", handler)  # every member is there (checked above)


def definition_of(handler: ToolHandler) -> Tool:
    return Tool(handler.name, handler.description, handler.parameters)


class ToolExecutor(Protocol):
    """Anything the agent loop can list tools from and dispatch calls to."""

    def names(self) -> list[str]: ...

    def definitions(self) -> list[Tool]: ...

    def capabilities(self, name: str) -> ToolCapabilities: ...

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str: ...

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView: ...


def _unknown_view(name: str) -> ToolView:
    from openheim.core.tool_view import ToolView

    return ToolView(name, DEFAULT_CAPABILITIES.kind)


class ToolRegistry:
    """Tools by name, listed in sorted order so provider prompt caches stay reusable."""

    def __init__(self, handlers: Iterable[ToolHandler] = ()) -> None:
        self._handlers: dict[str, ToolHandler] = {}
        for h in handlers:
            self.register(h)

    def register(self, handler: ToolHandler) -> None:
        check_handler(handler)
        if handler.name in self._handlers:
            log.warning("Tool name collision: %s registered twice; the later one wins", handler.name)
        self._handlers[handler.name] = handler

    def names(self) -> list[str]:
        return sorted(self._handlers)

    def get(self, name: str) -> ToolHandler | None:
        return self._handlers.get(name)

    def definitions(self) -> list[Tool]:
        return [definition_of(self._handlers[n]) for n in self.names()]

    def capabilities(self, name: str) -> ToolCapabilities:
        h = self._handlers.get(name)
        return h.capabilities if h else DEFAULT_CAPABILITIES

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        handler = self._handlers.get(name)
        if handler is None:
            raise ToolExecutionError(f"Unknown tool: {name}")
        return handler.execute(decode_arguments(arguments), ctx)

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        handler = self._handlers.get(name)
        if handler is None:
            return _unknown_view(name)
        try:
            view = handler.present(args, where)
        except Exception:  # how a call looks must never break the turn
            log.exception("tool %s could not present its call", name)
            from openheim.core.tool_view import ToolView

            view = ToolView(name, handler.capabilities.kind)
        return replace(view, read_only=handler.capabilities.read_only)

    def __len__(self) -> int:
        return len(self._handlers)

    def __contains__(self, name: object) -> bool:
        return name in self._handlers


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

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        return self.inner.present(name, args, where) if name in self.allowed else _unknown_view(name)

    def __len__(self) -> int:
        return len(self.allowed)

    def __contains__(self, name: object) -> bool:
        return name in self.allowed


class LayeredExecutor:
    """Several executors as one tool set: each name is served by the first layer that has it. A layer's
    tools may change (a session's MCP tools as servers come up): the owners follow its names."""

    def __init__(self, *layers: ToolExecutor) -> None:
        self.layers = layers
        self._index: tuple[tuple[list[str], ...], dict[str, ToolExecutor], list[str]] | None = None

    def _owners(self) -> tuple[dict[str, ToolExecutor], list[str]]:
        """Which layer serves each name, and the names sorted; recomputed when some layer's names changed
        (one tuple swapped at once, so parallel tool calls never see half an update)."""
        seen = tuple(layer.names() for layer in self.layers)
        index = self._index
        if index is None or index[0] != seen:
            owners: dict[str, ToolExecutor] = {}
            for layer, names in zip(self.layers, seen):
                for name in names:
                    if name in owners:
                        log.debug("tool %s is shadowed by an earlier layer", name)
                        continue
                    owners[name] = layer
            index = self._index = (seen, owners, sorted(owners))
        return index[1], index[2]

    def _owner(self, name: str) -> ToolExecutor | None:
        return self._owners()[0].get(name)

    def names(self) -> list[str]:
        return list(self._owners()[1])

    def definitions(self) -> list[Tool]:
        owners, names = self._owners()
        found = {
            t.name: t for layer in reversed(self.layers) for t in layer.definitions() if owners.get(t.name) is layer
        }
        return [found[n] for n in names if n in found]

    def capabilities(self, name: str) -> ToolCapabilities:
        owner = self._owner(name)
        return owner.capabilities(name) if owner is not None else DEFAULT_CAPABILITIES

    def execute(self, name: str, arguments: str, ctx: TurnContext) -> str:
        owner = self._owner(name)
        if owner is None:
            raise ToolExecutionError(f"Unknown tool: {name}")
        return owner.execute(name, arguments, ctx)

    def present(self, name: str, args: dict | None, where: ViewContext) -> ToolView:
        owner = self._owner(name)
        return owner.present(name, args, where) if owner is not None else _unknown_view(name)

    def __len__(self) -> int:
        return len(self._owners()[1])

    def __contains__(self, name: object) -> bool:
        return name in self._owners()[0]
