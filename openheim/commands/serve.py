"""`openheim serve`: the command that starts the server of openheim/serve and stops it on a signal."""
from __future__ import annotations

import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.config.loopback import is_loopback
from openheim.core.signals import SignalRoute, exit_code
from openheim.serve.server import DEFAULT_HOST, DEFAULT_PORT, OpenheimServer, ServeOptions, resolve_options

if TYPE_CHECKING:
    from openheim.client import OpenheimClient


def run_server(client: OpenheimClient, options: ServeOptions) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP, then shut down gracefully; returns the exit code (0)."""
    from openheim.tools.process import kill_all

    server = OpenheimServer(client, options).start()
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        if stop.is_set():  # a second Ctrl-C: stop waiting for the graceful shutdown
            kill_all()
            os._exit(exit_code(signum))
        stop.set()

    route = SignalRoute(on_signal)
    auth = "token required" if options.token else "no token: loopback only"
    click.echo(f"openheim serve: listening on {server.url} ({auth}); work dir {server.root}; Ctrl-C stops",
               err=True)
    if options.token and not is_loopback(options.host):
        click.echo("openheim serve: note: plain HTTP; put a TLS proxy in front before exposing it beyond a "
                   "trusted network", err=True)
    sys.stderr.flush()
    while not stop.wait(1.0):
        pass
    click.echo("openheim serve: shutting down", err=True)
    server.shutdown()
    kill_all()
    route.restore()
    return 0


@click.command("serve")
@click.option("--host", help=f"Address to bind (default: [serve] host, else {DEFAULT_HOST}). "
                             "Any non-loopback address needs a token.")
@click.option("--port", type=click.IntRange(0, 65535), help=f"Port (default: [serve] port, else {DEFAULT_PORT}; "
                                                            "0 picks a free one).")
@click.option("--token", help="Require this token on every request (better: the variable named by "
                              "[serve] token_env, OPENHEIM_SERVE_TOKEN by default).")
@click.pass_context
def serve_command(ctx: click.Context, host: str | None, port: int | None, token: str | None) -> None:
    """Serve ACP over WebSocket (/acp, /ws), a REST API (/api) and a chat page (/)."""
    from openheim.client import OpenheimClient
    from openheim.config.load import load_config

    config_path = (ctx.obj or {}).get("config_path")
    config = load_config(config_path)
    options = resolve_options(config.serve, host, port, token)
    builder = OpenheimClient.builder().config_path(config_path)
    if config.work_dir is None:  # as the reference: every session and the fs channel share the start directory
        builder.work_dir(Path.cwd())
    sys.exit(run_server(builder.build(), options))
