"""The read-only tools that list and read the resources of a session's MCP servers: ``list_mcp_resources``
and ``read_mcp_resource``, offered while at least one of its servers lists resources."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from openheim.core.models import ImageBlock
from openheim.core.tool_images import ResultText, checked_image, image_note
from openheim.core.tools import BaseTool, ToolCapabilities, ToolView, short
from openheim.errors import ToolExecutionError
from openheim.mcp.content import block_text

if TYPE_CHECKING:
    from openheim.core.tools import ViewContext
    from openheim.core.turn_context import CancelToken, TurnContext

T = TypeVar("T")
LIST_TOOL, READ_TOOL = "list_mcp_resources", "read_mcp_resource"
MAX_ENTRIES = 100  # resources and templates in one listing; the rest is one call away (its cursor)
MAX_PAGES = 20
DESCRIPTION_CHARS = 200
READ_ONLY = ToolCapabilities(read_only=True, kind="read")


class ResourceServer(Protocol):
    """What the tools need of a server (an ``McpServer``)."""

    name: str
    has_resources: bool

    def request(
        self, what: str, work: Callable[[Any], Awaitable[T]], cancel: CancelToken | None = None, limit: float = ...
    ) -> T: ...


Servers = Callable[[], Sequence[ResourceServer]]


def resource_tools(servers: Servers) -> list[BaseTool]:
    """The two tools over ``servers()`` (read when a call runs, so they follow the servers as they come up)."""
    return [ListResources(servers), ReadResource(servers)]


def with_resources(servers: Sequence[ResourceServer]) -> list[ResourceServer]:
    return [s for s in servers if s.has_resources]


def pick(servers: Sequence[ResourceServer], name: object) -> ResourceServer:
    """The server called ``name`` that lists resources; a one-line error naming those there are otherwise."""
    offered = with_resources(servers)
    for server in offered:
        if server.name == name:
            return server
    names = ", ".join(s.name for s in offered) or "none"
    if any(s.name == name for s in servers):
        raise ToolExecutionError(f"MCP server '{name}' lists no resources; servers with resources: {names}")
    raise ToolExecutionError(f"unknown MCP server '{name}'; servers with resources: {names}")


def entry(server: str, item: dict, key: str = "uri") -> dict:
    """One resource (or template) as listed: server, uri (or uriTemplate), name, mimeType, description."""
    out = {"server": server, key: item.get(key, ""), "name": item.get("name") or item.get("title") or ""}
    if item.get("mimeType"):
        out["mimeType"] = item["mimeType"]
    if item.get("description"):
        out["description"] = short(item["description"], DESCRIPTION_CHARS)
    return out


class ListResources(BaseTool):
    name = LIST_TOOL
    description = (
        "List the resources (files, documents, records) that the connected MCP servers offer to read with "
        "read_mcp_resource. Give `server` to list one server's; `cursor` (with `server`) continues a "
        "listing that said there is more."
    )
    parameters = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "Only this MCP server's resources"},
            "cursor": {"type": "string", "description": "Continue a listing: the cursor it gave for that server"},
        },
    }
    capabilities = READ_ONLY

    def __init__(self, servers: Servers) -> None:
        self.servers = servers

    def execute(self, args: dict, ctx: TurnContext) -> str:
        server, cursor = args.get("server"), args.get("cursor")
        if cursor is not None and (not isinstance(cursor, str) or server is None):
            raise ToolExecutionError("'cursor' must be a string and needs 'server' (the server that gave it)")
        servers = self.servers()
        targets = [pick(servers, server)] if server is not None else with_resources(servers)
        listing: dict[str, list] = {"resources": [], "templates": [], "more": [], "errors": []}
        for target in targets:
            room = MAX_ENTRIES - len(listing["resources"]) - len(listing["templates"])
            if room <= 0:
                listing["more"].append({"server": target.name})
                continue
            try:
                found = target.request(
                    "resources/list", partial(list_entries, server=target.name, cursor=cursor, room=room), ctx.cancel
                )
            except ToolExecutionError as e:
                if server is not None:
                    raise
                listing["errors"].append({"server": target.name, "error": e.message})
                continue
            resources, templates, more = found
            listing["resources"] += resources
            listing["templates"] += templates
            if more:
                listing["more"].append({"server": target.name, "cursor": more})
        return json.dumps({k: v for k, v in listing.items() if v or k == "resources"}, ensure_ascii=False, indent=1)

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        server = (args or {}).get("server")
        return ToolView(f"list MCP resources{f' of {server}' if server else ''}", "read")


class ReadResource(BaseTool):
    name = READ_TOOL
    description = (
        "Read one resource of an MCP server by its URI (as list_mcp_resources gives it, or filled in from "
        "a template). Text comes back as text, an image attached, other binary content as a note."
    )
    parameters = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "The MCP server that offers the resource"},
            "uri": {"type": "string", "description": "The resource's URI"},
        },
        "required": ["server", "uri"],
    }
    capabilities = READ_ONLY

    def __init__(self, servers: Servers) -> None:
        self.servers = servers

    def execute(self, args: dict, ctx: TurnContext) -> str:
        uri = args.get("uri")
        if not isinstance(uri, str) or not uri:
            raise ToolExecutionError("'uri' is required: a resource URI from list_mcp_resources")
        server = pick(self.servers(), args.get("server"))
        result = server.request(f"resources/read of {uri}", lambda s: _read(s, uri), ctx.cancel)
        contents = [c for c in result.get("contents") or [] if isinstance(c, dict)]
        if not contents:
            return f"[resource {uri}: no content]"
        return resource_text(contents)

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        args = args or {}
        return ToolView(short(f"read {args.get('server', '?')}: {args.get('uri', '?')}"), "read")


def resource_text(contents: list[dict]) -> str:
    """A resources/read result's contents: text as its URI and text; an image blob attached to the result (a
    ``ResultText``; one that fails the checks of prompt images is noted as not sent); other blobs as a note."""
    lines: list[str] = []
    images: list[ImageBlock] = []
    for content in contents:
        mime = str(content.get("mimeType") or "unknown")
        if "blob" in content and mime.startswith("image/"):
            verdict = checked_image(content.get("blob"))
            lines.append(f"[resource {content.get('uri', '')}] {image_note(mime, verdict)}")
            if isinstance(verdict, ImageBlock):
                images.append(verdict)
        else:
            lines.append(block_text({"type": "resource", "resource": content}))
    text = "\n".join(lines)
    return ResultText(text, images) if images else text


async def list_entries(session: Any, server: str, cursor: str | None, room: int) -> tuple[list, list, str | None]:
    """Pages of resources/list from ``cursor`` until ``room`` entries; the first listing adds the templates."""
    from mcp.types import PaginatedRequestParams

    first = cursor is None
    resources: list[dict] = []
    for _ in range(MAX_PAGES):
        page = await session.list_resources(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        resources += [
            entry(server, r.model_dump(by_alias=True, mode="json", exclude_none=True)) for r in page.resources
        ]
        cursor = page.next_cursor
        if not cursor or len(resources) >= room:
            break
    templates: list[dict] = []
    if first and cursor is None and len(resources) < room:
        try:
            page = await session.list_resource_templates()
        except Exception:  # templates are optional: a server without them may refuse the method
            page = None
        templates = [
            entry(server, t.model_dump(by_alias=True, mode="json", exclude_none=True), "uriTemplate")
            for t in (page.resource_templates if page is not None else [])
        ]
    return resources, templates[: max(0, room - len(resources))], cursor


async def _read(session: Any, uri: str) -> dict:
    result = await session.read_resource(uri)
    return dict(result.model_dump(by_alias=True, mode="json", exclude_none=True))
