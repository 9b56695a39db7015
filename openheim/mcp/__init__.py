"""MCP client: tools from Model Context Protocol servers, run on one asyncio bridge thread.

Nothing here imports the ``mcp`` SDK at module level; the bridge thread imports it when the first
server starts, so a runtime with no MCP servers never pays for it.
"""
