"""A small real MCP server (the SDK's MCPServer) for the MCP tests, over stdio or streamable HTTP.

    python tests/support/mcp_server.py                  # stdio
    python tests/support/mcp_server.py --http           # streamable HTTP on 127.0.0.1, prints "PORT <n>" first
    python tests/support/mcp_server.py --http --sse     # the older HTTP+SSE transport (GET /sse) instead
    python tests/support/mcp_server.py --name other     # the server's name (serverInfo)
    python tests/support/mcp_server.py --delay 3        # starts serving after 3 s
    python tests/support/mcp_server.py --delay-file F   # starts serving after the seconds written in F (if it exists)

Tools: echo, fail (isError), sleep, picture (image + text), huge_picture (a PNG over 5 MB), resources
(embedded text, blob, link), crash (the process exits mid-call), env (one variable of the server's
environment), note_stderr (writes a line to stderr), spawn_child (starts a grandchild that sleeps), pid,
header (an HTTP request header), peek (read-only hint); with --grow also grow (adds the tool 'grown' and sends
tools/list_changed).
"""

from __future__ import annotations

import argparse
import base64
import os
import socket
import subprocess
import sys
import time

from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import (
    BlobResourceContents,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    TextResourceContents,
    ToolAnnotations,
)

TINY_PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="


def build(name: str, grow: bool = False) -> MCPServer:
    server = MCPServer(name)

    @server.tool()
    def echo(text: str) -> str:
        """Echo the text back."""
        return f"echo: {text}"

    @server.tool()
    def fail(message: str = "it broke") -> str:
        """Always fails (the result is flagged isError)."""
        raise ToolError(message)

    @server.tool()
    def sleep(seconds: float) -> str:
        """Sleep, then say so."""
        time.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def picture() -> list:
        """A caption and a tiny PNG."""
        return [
            TextContent(type="text", text="a red dot"),
            ImageContent(type="image", data=TINY_PNG, mime_type="image/png"),
        ]

    @server.tool()
    def huge_picture() -> list:
        """A PNG just over the 5 MB limit for an image."""
        data = base64.b64decode(TINY_PNG)[:16] + b"\0" * (5 * 1024 * 1024 + 1)
        return [ImageContent(type="image", data=base64.b64encode(data).decode(), mime_type="image/png")]

    @server.tool()
    def resources() -> list:
        """An embedded text resource, an embedded blob and a resource link."""
        return [
            EmbeddedResource(
                type="resource",
                resource=TextResourceContents(uri="file:///notes.txt", mime_type="text/plain", text="the notes say hi"),
            ),
            EmbeddedResource(
                type="resource",
                resource=BlobResourceContents(
                    uri="file:///data.bin", mime_type="application/octet-stream", blob="AAEC"
                ),
            ),
            ResourceLink(type="resource_link", name="readme", uri="file:///README.md"),
        ]

    @server.tool()
    def crash() -> str:
        """The server process exits in the middle of the call."""
        os._exit(3)

    @server.tool()
    def env(name: str) -> str:
        """One variable of the server's environment ('<unset>' when absent)."""
        return os.environ.get(name, "<unset>")

    @server.tool()
    def note_stderr(text: str) -> str:
        """Write a line to the server's stderr."""
        print(text, file=sys.stderr, flush=True)
        return "noted"

    @server.tool()
    def spawn_child() -> str:
        """Start a grandchild that sleeps for a long time; returns its pid."""
        child = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(300)"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return str(child.pid)

    @server.tool()
    def write(path: str, text: str) -> str:
        """Write ``text`` to ``path``: 'wrote', or the error (for the sandbox tests)."""
        try:
            with open(path, "w") as f:
                f.write(text)
        except OSError as e:
            return f"refused: {e.strerror}"
        return "wrote"

    @server.tool()
    def pid() -> str:
        """The server's process id."""
        return str(os.getpid())

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """One header of the HTTP request that carried this call ('<none>' over stdio or when absent)."""
        request = getattr(ctx.request_context, "request", None)
        headers = getattr(request, "headers", None)
        return headers.get(name, "<none>") if headers is not None else "<none>"

    @server.tool(annotations=ToolAnnotations(read_only_hint=True))
    def peek(path: str = ".") -> str:
        """A read-only tool (annotated readOnlyHint)."""
        return f"peeked at {path}"

    if grow:

        @server.tool(name="grow")
        async def add_a_tool(ctx: Context) -> str:
            """Add the tool 'grown' and tell the client the tool list changed (then take a moment to answer)."""
            import anyio

            def grown() -> str:
                """A tool that appeared after start-up."""
                return "grown"

            server.add_tool(grown)
            await ctx.session.send_tool_list_changed()
            await anyio.sleep(0.5)  # the client lists the tools again meanwhile
            return "grew"

    return server


def serve_http(server: MCPServer, port: int = 0, sse: bool = False) -> None:
    import anyio
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)  # connections queue from now on, so a client may connect as soon as it reads the port
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    app = server.sse_app(host="127.0.0.1") if sse else server.streamable_http_app(host="127.0.0.1")
    config = uvicorn.Config(app, log_level="warning")
    anyio.run(lambda: uvicorn.Server(config).serve(sockets=[sock]))


def _seconds_in(path: str | None) -> float:
    try:
        return float(open(path).read()) if path else 0.0
    except (OSError, ValueError):
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")
    parser.add_argument("--sse", action="store_true", help="with --http: the older HTTP+SSE transport (/sse)")
    parser.add_argument("--name", default="fake")
    parser.add_argument("--port", type=int, default=0, help="with --http: the port (default: any free one)")
    parser.add_argument("--tag", help="ignored; lets a test find its processes by command line")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds to wait before serving (a slow start)")
    parser.add_argument("--grow", action="store_true", help="also offer the tool 'grow'")
    parser.add_argument(
        "--delay-file",
        help="a file holding the seconds to wait (read at start; absent: 0), so a "
        "test can slow a server down without changing its config entry",
    )
    opts = parser.parse_args()
    time.sleep(opts.delay + _seconds_in(opts.delay_file))
    server = build(opts.name, opts.grow)
    if opts.http:
        serve_http(server, opts.port, opts.sse)
    else:
        server.run()


if __name__ == "__main__":
    main()
