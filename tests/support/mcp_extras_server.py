"""A real MCP server (the SDK's MCPServer, stdio) with resources and prompts, for the resource and prompt tests.

Resources: notes://readme (text), notes://logo (a PNG blob), notes://drawing (an SVG blob), the template notes://topic/{topic}.
Prompts: review (code required, language optional), greet (no arguments), with_notes (a text plus an
embedded resource), slow (seconds), broken (fails). ``--no-resources`` leaves the resources out (its prompts stay).
"""

from __future__ import annotations

import argparse
import base64

import anyio
from mcp.server import MCPServer

README = "the readme says: hello from the docs server"
LOGO = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
NOT_AN_IMAGE = b"<svg/>"


def build(with_resources: bool) -> MCPServer:
    server = MCPServer("docs")

    if with_resources:

        @server.resource(
            "notes://readme", name="readme", description="What the docs server is about", mime_type="text/plain"
        )
        def readme() -> str:
            return README

        @server.resource("notes://logo", name="logo", mime_type="image/png")
        def logo() -> bytes:
            return LOGO

        @server.resource("notes://drawing", name="drawing", mime_type="image/svg+xml")
        def drawing() -> bytes:
            return NOT_AN_IMAGE

        @server.resource("notes://topic/{topic}", name="topic", description="Notes on one topic")
        def topic(topic: str) -> str:
            return f"notes on {topic}"

    @server.prompt(description="Review a piece of code")
    def review(code: str, language: str = "python") -> str:
        return f"Please review this {language} code:\n{code}"

    @server.prompt(description="Say hello")
    def greet() -> list:
        return [
            {"role": "user", "content": "Hello from the greet prompt"},
            {"role": "assistant", "content": "Hi! What shall we do?"},
        ]

    @server.prompt(description="The readme, embedded")
    def with_notes() -> list:
        return [
            {"role": "user", "content": "Summarise these notes:"},
            {
                "role": "user",
                "content": {
                    "type": "resource",
                    "resource": {"uri": "notes://readme", "mimeType": "text/plain", "text": README},
                },
            },
        ]

    @server.prompt(description="Takes its time")
    async def slow(seconds: str) -> str:
        await anyio.sleep(float(seconds))
        return "the slow prompt"

    @server.prompt(description="Always fails")
    def broken() -> str:
        raise ValueError("the prompt broke")

    return server


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--no-resources", action="store_true")
    parser.add_argument("--tag", help="ignored; lets a test find its processes by command line")
    opts = parser.parse_args()
    build(not opts.no_resources).run()


if __name__ == "__main__":
    main()
