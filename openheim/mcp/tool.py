"""An MCP server's tool as an openheim tool handler."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Protocol

from openheim.core.tools import BaseTool, ToolCapabilities, ToolView
from openheim.mcp.naming import exposed_name

if TYPE_CHECKING:
    from openheim.core.tools import ViewContext
    from openheim.core.turn_context import CancelToken, TurnContext

log = logging.getLogger(__name__)

EMPTY_SCHEMA = {"type": "object", "properties": {}}


class ToolServer(Protocol):
    """What a tool needs of its server (an ``McpServer``): its name and a way to call a tool."""

    name: str

    def call(self, tool: str, arguments: dict, cancel: CancelToken | None = None) -> str: ...


def input_schema(spec: dict) -> dict:
    """The server's input schema, passed through; made an object schema when it is not one."""
    schema = spec.get("inputSchema")
    if not isinstance(schema, dict) or not schema:
        return dict(EMPTY_SCHEMA)
    if schema.get("type") != "object":
        return {**schema, "type": "object", "properties": schema.get("properties") or {}}
    return schema


def capabilities_of(spec: dict) -> ToolCapabilities:
    """Not read-only, unless the server marks the tool ``readOnlyHint: true`` (see docs/mcp.md)."""
    annotations = spec.get("annotations")
    read_only = isinstance(annotations, dict) and annotations.get("readOnlyHint") is True
    return ToolCapabilities(read_only=read_only, kind="other")


class McpTool(BaseTool):
    """``{server}__{tool}``: description and input schema from the server; calls go through the bridge."""

    def __init__(self, server: ToolServer, spec: dict) -> None:
        self.server = server
        self.tool_name = str(spec.get("name", ""))
        self.name = exposed_name(server.name, self.tool_name)
        self.description = str(spec.get("description") or "")
        self.parameters = input_schema(spec)
        self.capabilities = capabilities_of(spec)

    def execute(self, args: dict, ctx: TurnContext) -> str:
        """The result's text; with images, a ``ResultText`` that carries them (see ``mcp.content``)."""
        return self.server.call(self.tool_name, args, ctx.cancel)

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        return ToolView(f"{self.server.name}: {self.tool_name}", "other")


def tools_of(server: ToolServer, specs: list[dict]) -> list[McpTool]:
    """A handler per tool definition; of tools that share an exposed name, the first (the rest: a warning each)."""
    tools: dict[str, McpTool] = {}
    for spec in specs:
        tool = McpTool(server, spec)
        if tool.name in tools:
            log.warning(
                "MCP server '%s': tools '%s' and '%s' share the name %s; the first is kept",
                server.name,
                tools[tool.name].tool_name,
                tool.tool_name,
                tool.name,
            )
            continue
        tools[tool.name] = tool
    return list(tools.values())
