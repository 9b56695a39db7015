"""`openheim serve`: the command that starts the server of openheim/serve and stops it on a signal."""

from __future__ import annotations

import os
import sys
import threading
from pathlib import Path

import click

from openheim.client import OpenheimClient
from openheim.commands.sandbox import chosen, sandbox_options
from openheim.config.load import load_config
from openheim.config.loopback import is_loopback
from openheim.core.control_chars import visible
from openheim.core.signals import SignalRoute, exit_code
from openheim.serve.server import DEFAULT_HOST, DEFAULT_PORT, OpenheimServer, ServeOptions, resolve_options
from openheim.tools.process import kill_all

TOKEN_FILE = "serve-token"


def write_token(data_dir: Path, token: str) -> Path:
    """The generated token, readable by this user only (0600), for local editors to pick up."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / TOKEN_FILE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    with open(fd, "w", encoding="utf-8") as f:
        os.fchmod(f.fileno(), 0o600)
        f.write(token + "\n")
    return path


def run_server(client: OpenheimClient, options: ServeOptions, token_file: Path | None = None) -> int:
    """Serve until SIGINT/SIGTERM/SIGHUP, then shut down gracefully; returns the exit code (0)."""
    server = OpenheimServer(client, options).start()
    stop = threading.Event()

    def on_signal(signum: int) -> None:
        if stop.is_set():  # a second Ctrl-C: stop waiting for the graceful shutdown
            kill_all()
            os._exit(exit_code(signum))
        stop.set()

    route = SignalRoute(on_signal)
    if options.token is None:
        where, auth = server.url, "no token: any local user or process may connect"
    elif token_file is not None:  # a generated token: the URL carries it, and the file keeps it
        where, auth = f"{server.url}?token={options.token}", f"token required, also in {token_file}"
    else:
        where, auth = server.url, "token required"
    click.echo(
        visible(f"openheim serve: listening on {where} ({auth}); work dir {server.root}; Ctrl-C stops"), err=True
    )
    if options.token is None:
        click.echo(
            "openheim serve: warning: --no-token lets every user and program on this machine run the agent "
            "and read and write the work dir; drop --no-token to require a token",
            err=True,
        )
    if options.token and not is_loopback(options.host):
        click.echo(
            "openheim serve: note: plain HTTP; put a TLS proxy in front before exposing it beyond a trusted network",
            err=True,
        )
    sys.stderr.flush()
    while not stop.wait(1.0):
        pass
    click.echo("openheim serve: shutting down", err=True)
    server.shutdown()
    kill_all()
    route.restore()
    return 0


@click.command("serve")
@click.option(
    "--host",
    help=f"Address to bind (default: [serve] host, else {DEFAULT_HOST}). Any non-loopback address needs a token.",
)
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    help=f"Port (default: [serve] port, else {DEFAULT_PORT}; 0 picks a free one).",
)
@click.option(
    "--token",
    help="Require this token on every request (better: the variable named by "
    "[serve] token_env, OPENHEIM_SERVE_TOKEN by default). Without one, a token is "
    "generated and written to the data dir.",
)
@click.option(
    "--no-token",
    is_flag=True,
    help="Loopback only: serve without a token, so every local user and program may connect.",
)
@sandbox_options
@click.pass_context
def serve_command(
    ctx: click.Context,
    host: str | None,
    port: int | None,
    token: str | None,
    no_token: bool,
    sandbox_mode: str | None = None,
    sandbox_required: bool | None = None,
) -> None:
    """Serve ACP over WebSocket (/acp, /ws), a REST API (/api) and a chat page (/)."""
    config_path = (ctx.obj or {}).get("config_path")
    config = load_config(config_path)
    options = resolve_options(config.serve, host, port, token, no_token=no_token)
    os.environ.pop(config.serve.token_env, None)  # no tool, shell or MCP server started from here inherits it
    builder = OpenheimClient.builder().config_path(config_path).sandbox(*chosen(ctx, sandbox_mode, sandbox_required))
    if config.work_dir is None:  # as the reference: every session and the fs channel share the start directory
        builder.work_dir(Path.cwd())
    client = builder.build()
    token_file = write_token(client.data_dir, options.token) if options.token_generated and options.token else None
    sys.exit(run_server(client, options, token_file))
