"""`openheim acp` (alias `openheim stdio`): serve the Agent Client Protocol on stdin/stdout."""

from __future__ import annotations

import os
import signal
import sys
from typing import BinaryIO

import click

from openheim.acp.lazy import LazyClient
from openheim.acp.server import serve_stdio
from openheim.client import OpenheimClient
from openheim.commands.sandbox import chosen, sandbox_options
from openheim.core.signals import SignalRoute, exit_code
from openheim.tools.process import kill_all


def protocol_streams() -> tuple[BinaryIO, BinaryIO]:
    """(stdin, protocol stdout); fd 1 and sys.stdout are pointed at stderr so stray prints never corrupt ACP."""
    out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=1 << 16)
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdout = sys.stderr
    return sys.stdin.buffer, out


def _on_signal(signum: int) -> None:
    """SIGTERM/SIGHUP: kill the tools' process groups and exit 128+signal (the finally below closes the client)."""
    kill_all()
    raise SystemExit(exit_code(signum))


def serve(
    config_path: str | None, mcp_config: str | None = None, sandbox: tuple[str | None, bool | None] = (None, None)
) -> int:
    """Serve until stdin closes. The runtime is built on first need, so `initialize` is always answered; a
    missing config or API key fails the requests that need it with a JSON-RPC error saying what to do."""

    def build() -> OpenheimClient:
        return OpenheimClient.builder().config_path(config_path).mcp_config(mcp_config).sandbox(*sandbox).build()

    client = LazyClient(build)
    inp, out = protocol_streams()
    route = SignalRoute(_on_signal, (signal.SIGTERM, signal.SIGHUP))
    try:
        return serve_stdio(client, inp, out)
    except KeyboardInterrupt:
        return exit_code(signal.SIGINT)
    finally:
        route.restore()
        client.close()  # every MCP server the sessions started ends with us


@click.command("acp")
@sandbox_options
@click.pass_context
def acp_command(ctx: click.Context, sandbox_mode: str | None = None, sandbox_required: bool | None = None) -> None:
    """Serve the Agent Client Protocol on stdin/stdout for editors (Zed, JetBrains, Neovim, ...)."""
    obj = ctx.obj or {}
    sys.exit(serve(obj.get("config_path"), obj.get("mcp_config"), chosen(ctx, sandbox_mode, sandbox_required)))


@click.command("stdio")
@sandbox_options
@click.pass_context
def stdio_command(ctx: click.Context, sandbox_mode: str | None = None, sandbox_required: bool | None = None) -> None:
    """Alias of `openheim acp`."""
    obj = ctx.obj or {}
    sys.exit(serve(obj.get("config_path"), obj.get("mcp_config"), chosen(ctx, sandbox_mode, sandbox_required)))
