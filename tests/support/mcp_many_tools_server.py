"""A real MCP server (the SDK's low-level Server, over stdio) that declares many tools, for the tool-budget tests.

    python tests/mcp_many_tools_server.py --tools 5000 [--giant-mib 5]

Tools: ``t0`` … ``t{N-1}`` (small; each echoes its name), and with ``--giant-mib`` first of all ``giant``,
whose inputSchema carries a description that many MiB long.
"""

from __future__ import annotations

import argparse

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=0)
    parser.add_argument("--giant-mib", type=int, default=0)
    parser.add_argument("--tag", help="ignored; lets a test find its processes by command line")
    opts = parser.parse_args()
    schema = {"type": "object", "properties": {"text": {"type": "string"}}}
    tools = [types.Tool(name=f"t{i}", description=f"Tool number {i}.", input_schema=schema) for i in range(opts.tools)]
    if opts.giant_mib:
        giant = {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "x" * (opts.giant_mib << 20)}},
        }
        tools.insert(0, types.Tool(name="giant", description="A tool with a huge schema.", input_schema=giant))

    async def list_tools(ctx, params) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(ctx, params) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])

    server = Server("many", on_list_tools=list_tools, on_call_tool=call_tool)

    async def serve() -> None:
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())

    anyio.run(serve)


if __name__ == "__main__":
    main()
