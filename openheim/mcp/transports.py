"""Entering an MCP server's transport on the bridge loop: stdio (the server's process, sandboxed when its
entry asks), streamable HTTP (with a stored sign-in, a 401 noted) or the older HTTP+SSE."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from contextlib import AsyncExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from openheim.mcp.oauth import AuthWatch, auth_for
from openheim.mcp.stdio import Link, stdio_transport
from openheim.sandbox.policy import Sandbox

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig
    from openheim.mcp.server_log import ServerLog


def sandboxed(argv: list[str], mode: str, cwd: Path | None) -> list[str]:
    """A stdio server's command line, run through the sandbox helper when its entry opts in (``sandbox =
    "read-only"`` or ``"workspace-write"``: writable is its cwd; no network; see docs/security.md)."""
    if mode == "off":
        return argv
    return Sandbox(mode=mode).wrap(argv, os.path.realpath(cwd or os.getcwd()))


async def enter_stdio(
    stack: AsyncExitStack, cfg: McpServerConfig, link: Link, server_log: ServerLog, sdk: Callable[[], Awaitable[None]]
) -> Any:
    """The server's process and its (read, write) streams; spawned while the SDK still loads (``sdk``)."""
    argv = sandboxed([cfg.command or "", *cfg.args], cfg.sandbox, cfg.cwd)
    return await stack.enter_async_context(stdio_transport(cfg, argv, link, server_log, sdk))


async def enter_http(stack: AsyncExitStack, cfg: McpServerConfig, data_dir: Path) -> tuple[Any, AuthWatch | None]:
    """(read, write) streams to an HTTP server, and for streamable HTTP the watch that notes a 401 (so a
    failure can say "needs login"); the sign-in stored under ``data_dir`` is used."""
    import httpx2

    if cfg.sse:
        from mcp.client.sse import sse_client

        streams = await stack.enter_async_context(
            sse_client(cfg.url or "", headers=dict(cfg.headers) or None, timeout=30.0, sse_read_timeout=300.0)
        )
        return streams, None
    from mcp.client.streamable_http import streamable_http_client

    watch = AuthWatch()
    client = httpx2.AsyncClient(
        headers=dict(cfg.headers) or None,
        timeout=httpx2.Timeout(30.0, read=300.0),
        auth=auth_for(cfg, data_dir),  # a stored sign-in
        event_hooks={"response": [watch]},
    )
    await stack.enter_async_context(client)
    return await stack.enter_async_context(streamable_http_client(cfg.url or "", http_client=client)), watch
