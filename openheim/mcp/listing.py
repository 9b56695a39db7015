"""What a connected MCP server offers, asked through the SDK's session: its tools (every page), whether it
lists resources, and its prompts. Each returns wire JSON (camelCase keys)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from openheim.mcp.failures import describe

log = logging.getLogger(__name__)

MAX_TOOL_PAGES = 100
MAX_PROMPTS = 200  # prompts kept of one server (each is a command in the chat and in an editor)
PROBE_LIMIT = 10.0  # seconds for listing a server's resources and prompts after it connected
T = TypeVar("T")


async def list_tools(session: Any) -> list[dict]:
    """Every page of tools/list."""
    from mcp.types import PaginatedRequestParams

    specs: list[dict] = []
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        result = await session.list_tools(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        specs.extend(t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in result.tools)
        cursor = result.next_cursor
        if not cursor:
            break
    return specs


async def has_resources(session: Any) -> bool:
    """Whether the server advertises resources and lists some, or some resource templates (first pages)."""
    caps = session.server_capabilities
    if caps is None or caps.resources is None:
        return False
    if (await session.list_resources()).resources:
        return True
    try:
        return bool((await session.list_resource_templates()).resource_templates)
    except Exception:  # templates are optional: a server without them may refuse the method
        return False


async def list_prompts(session: Any) -> list[dict]:
    """Every page of prompts/list, when the server advertises prompts (at most MAX_PROMPTS)."""
    from mcp.types import PaginatedRequestParams

    caps = session.server_capabilities
    if caps is None or caps.prompts is None:
        return []
    prompts: list[dict] = []
    cursor = None
    for _ in range(MAX_TOOL_PAGES):
        result = await session.list_prompts(params=PaginatedRequestParams(cursor=cursor) if cursor else None)
        prompts.extend(p.model_dump(by_alias=True, mode="json", exclude_none=True) for p in result.prompts)
        cursor = result.next_cursor
        if not cursor or len(prompts) >= MAX_PROMPTS:
            break
    return prompts[:MAX_PROMPTS]


async def probe(session: Any, name: str) -> tuple[bool, list[dict]]:
    """(lists resources, its prompts), asked at once; what fails to list within PROBE_LIMIT counts as none."""

    async def bounded(what: str, lister: Callable[[Any], Awaitable[T]], none: T) -> T:
        try:
            return await asyncio.wait_for(lister(session), PROBE_LIMIT)
        except Exception as e:
            log.info("MCP server '%s': listing its %s failed: %s", name, what, describe(e))
            return none

    no_prompts: list[dict] = []
    resources, prompts = await asyncio.gather(
        bounded("resources", has_resources, False), bounded("prompts", list_prompts, no_prompts)
    )
    return resources, prompts
