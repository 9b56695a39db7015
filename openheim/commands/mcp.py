"""`openheim mcp …`: the status of the MCP servers openheim would use here, trusting a project's .mcp.json,
and signing in to HTTP servers that need OAuth (`login`, `logout`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.client import OpenheimClient
from openheim.commands.run import exit_now
from openheim.config.load import data_dir, load_config
from openheim.config.mcp_json import load_mcp_file, variables_read
from openheim.core.control_chars import visible
from openheim.errors import ConfigError, InvalidArgument, OpenheimError
from openheim.mcp import oauth, tool_budget
from openheim.mcp import trust as store
from openheim.mcp.project import read_project

if TYPE_CHECKING:
    from openheim.config.schema import McpServerConfig

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")
_TIMEOUT = click.option(
    "--timeout",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    help="Seconds to wait for servers that are still starting.",
)
_TOOLS = click.option(
    "--tools",
    "show_tools",
    is_flag=True,
    help="List each server's tools too (and its prompts, and whether it lists resources).",
)
_COLUMNS = ("NAME", "SOURCE", "TRANSPORT", "STATE", "TOOLS", "DETAIL")


class _ConfigProblem(click.ClickException):
    exit_code = 2


def _fail(error: OpenheimError) -> click.ClickException:
    line = " ".join(str(error).split())
    return _ConfigProblem(line) if isinstance(error, (ConfigError, InvalidArgument)) else click.ClickException(line)


@click.group("mcp", invoke_without_command=True)
@_JSON
@_TIMEOUT
@_TOOLS
@click.pass_context
def mcp(ctx: click.Context, as_json: bool, timeout: float, show_tools: bool) -> None:
    """MCP servers: with no subcommand, the status of every server openheim would use in this directory.

    Servers come from [mcp_servers.NAME] in config.toml, from --mcp-config FILE, and from a project's
    .mcp.json in the sandbox root once `openheim mcp trust` has recorded it. Each is started to check it.
    """
    if ctx.invoked_subcommand is None:
        ctx.invoke(status, as_json=as_json, timeout=timeout, show_tools=show_tools)


@mcp.command()
@_JSON
@_TIMEOUT
@_TOOLS
@click.pass_context
def status(ctx: click.Context, as_json: bool, timeout: float, show_tools: bool) -> None:
    """Start every server, wait for it (up to --timeout), and show whether it connected and its tools."""
    import logging

    logging.getLogger("openheim.mcp").setLevel(logging.ERROR)  # the table says what failed, once
    obj = ctx.find_object(dict) or {}
    try:
        client = (
            OpenheimClient.builder()
            .config_path(obj.get("config_path"))
            .mcp_config(obj.get("mcp_config"))
            .check_model(False)
            .build()
        )
    except OpenheimError as e:
        raise _fail(e) from None
    try:
        statuses = client.mcp_servers(wait=timeout, cwd=os.getcwd())
    finally:  # the servers are told to stop and end with this process: the table does not wait for them
        client.close(wait_for_servers=False)
    if as_json:
        click.echo(json.dumps({"servers": [s.to_dict() for s in statuses]}, ensure_ascii=False, indent=2))
        _done(statuses)
        return
    if not statuses:
        click.echo(
            "No MCP servers configured. Add [mcp_servers.NAME] to config.toml, pass --mcp-config FILE, "
            "or trust a project's .mcp.json with `openheim mcp trust`."
        )
        return
    _table(statuses, show_tools)
    _done(statuses)


def _table(statuses: list, show_tools: bool) -> None:
    """The status table; under it what a server's tool budget left out, and with --tools each server's tools."""
    rows = [
        (s.name, s.source, s.transport, s.state, str(s.tool_count), s.error or s.url or s.command or "")
        for s in statuses
    ]
    widths = [max(len(r[i]) for r in [_COLUMNS, *rows]) for i in range(len(_COLUMNS) - 1)]
    for row in [_COLUMNS, *rows]:
        cells = [c.rjust(w) if i == 4 else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths))]
        click.echo(visible("  ".join([*cells, row[-1]]).rstrip()))
    for s in statuses:
        if s.tools_left_out:
            click.echo(
                visible(tool_budget.notice(s.name, s.tool_count + len(s.tools_left_out), list(s.tools_left_out)))
            )
    if show_tools:
        for s in statuses:
            if s.tools:
                click.echo(visible(f"\n{s.name}: {', '.join(s.tools)}"))
            if s.prompts:
                click.echo(visible(f"{s.name} prompts: {', '.join(s.prompts)}"))
            if s.resources:
                click.echo(visible(f"{s.name} lists resources (list_mcp_resources, read_mcp_resource)"))


def _done(statuses: list) -> None:
    """With servers (and so the SDK) loaded, exit without the interpreter's teardown, as `run` does."""
    if statuses:
        exit_now(0)


def _default_file(ctx: click.Context) -> Path:
    """``.mcp.json`` in the sandbox root: the configured work_dir, else the current directory."""
    obj = ctx.find_object(dict) or {}
    try:
        work_dir = load_config(obj.get("config_path")).work_dir
    except OpenheimError:
        work_dir = None
    return Path(work_dir or os.getcwd()) / ".mcp.json"


def _data_dir(ctx: click.Context) -> Path:
    obj = ctx.find_object(dict) or {}
    try:
        config = load_config(obj.get("config_path"))
    except OpenheimError:
        config = None
    return data_dir(config)


@mcp.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def trust(ctx: click.Context, file: str | None) -> None:
    """Use the servers of a project's .mcp.json (default: the one in the sandbox root).

    It runs the commands it lists whenever openheim starts a session there, so read it first; any later
    change to the file needs trusting again.
    """
    path = Path(file) if file else _default_file(ctx)
    try:
        raw = path.read_text(encoding="utf-8")
        entries = json.loads(raw).get("mcpServers")
    except FileNotFoundError:
        raise _ConfigProblem(f"{path} does not exist; give the path of a .mcp.json file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise _ConfigProblem(f"cannot read {path}: {e}") from None
    except (ValueError, AttributeError):
        raise _ConfigProblem(f'{path} is not an {{"mcpServers": ...}} JSON file; nothing was trusted') from None
    if not isinstance(entries, dict):
        raise _ConfigProblem(f'{path} has no "mcpServers" object; nothing was trusted')
    try:
        sha = store.trust(_data_dir(ctx), path)
    except OpenheimError as e:
        raise _fail(e) from None
    click.echo(visible(f"Trusted {store.real_path(path)} (sha256 {sha[:12]}…). Its servers:"))
    for name, entry in entries.items():
        click.echo(visible(f"  {name}: {_describe_entry(entry)}"))
        for line in _entry_details(entry):
            click.echo(visible(f"      {line}"))
    click.echo(
        "They start in openheim sessions rooted there; if the file, or a script inside the project that a "
        "server's command or args name, changes, trust it again. Packages they fetch are not pinned."
    )


def _entry_details(entry: object) -> list[str]:
    """The environment variables and headers an entry sets, and the ${VAR}s of this machine it reads."""
    if not isinstance(entry, dict):
        return []
    reads = variables_read(entry)
    lines = []
    for table in ("env", "headers"):
        values = entry.get(table)
        if isinstance(values, dict) and values:
            named = [
                f"{key} (reads ${{{', '.join(reads[f'{table} {key}'])}}})" if f"{table} {key}" in reads else str(key)
                for key in values
            ]
            lines.append(f"{table}: {', '.join(named)}")
    for place in ("command", "args", "url"):
        if place in reads:
            lines.append(f"{place} reads: {', '.join('$' + v for v in reads[place])}")
    return lines


def _describe_entry(entry: object) -> str:
    if not isinstance(entry, dict):
        return "(not an object; ignored)"
    if entry.get("url"):
        return f"{entry.get('type') or 'http'} {entry['url']}"
    args = entry.get("args")
    if not isinstance(args, list):
        args = []
    return " ".join(str(p) for p in [entry.get("command", "?"), *args])


@mcp.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.pass_context
def untrust(ctx: click.Context, file: str | None) -> None:
    """Stop using a project's .mcp.json (default: the one in the sandbox root)."""
    path = Path(file) if file else _default_file(ctx)
    if store.untrust(_data_dir(ctx), path):
        click.echo(visible(f"{store.real_path(path)} is no longer trusted."))
    else:
        click.echo(visible(f"{store.real_path(path)} was not trusted."))


def _http_server(ctx: click.Context, name: str) -> tuple[McpServerConfig, Path]:
    """The HTTP server ``name`` (from config.toml, --mcp-config or a trusted project's .mcp.json) and the data
    dir; a one-line error otherwise."""
    obj = ctx.find_object(dict) or {}
    try:
        config = load_config(obj.get("config_path"))
        servers = dict(config.mcp_servers)
        if obj.get("mcp_config"):
            servers.update(load_mcp_file(obj["mcp_config"], "mcp-config"))
        project = read_project(Path(os.path.realpath(config.work_dir or os.getcwd())), data_dir(config))
        if project is not None and project.trusted:  # a trusted project's .mcp.json
            servers = {**project.servers, **servers}
    except OpenheimError as e:
        raise _fail(e) from None
    server = servers.get(name)
    if server is None:
        known = ", ".join(sorted(servers)) or "none"
        raise _ConfigProblem(
            f"no MCP server named '{name}' (configured: {known}); add [mcp_servers.{name}] with its url to config.toml"
        )
    if not server.url:
        raise _ConfigProblem(f"MCP server '{name}' runs a command (stdio); only HTTP servers sign in")
    return server, data_dir(config)


@mcp.command()
@click.argument("name")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=0,
    show_default=True,
    help="Loopback port that catches the browser's redirect (0: any free one).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=300.0,
    show_default=True,
    help="Seconds to wait for the redirect.",
)
@click.pass_context
def login(ctx: click.Context, name: str, port: int, timeout: float) -> None:
    """Sign in to the HTTP MCP server NAME with OAuth (works over SSH).

    Prints the authorization address; open it in any browser. If that browser is on this machine, the
    redirect is caught on a loopback port; if not, paste the address the browser ends up on (it starts
    with http://127.0.0.1:PORT/callback) here. Tokens are kept (0600) in the data dir and refreshed.
    """
    import sys

    server, data = _http_server(ctx, name)
    try:
        tools = oauth.login(server, data, sys.stdout, sys.stdin, port, timeout)
    except OpenheimError as e:
        raise click.ClickException(" ".join(str(e).split())) from None
    click.echo(visible(f"Signed in to '{name}' ({tools} tools). The login is kept in {oauth.token_path(data, name)}."))


@mcp.command()
@click.argument("name")
@click.pass_context
def logout(ctx: click.Context, name: str) -> None:
    """Forget the sign-in to the MCP server NAME (its tokens are deleted)."""
    _, data = _http_server(ctx, name)
    if oauth.logout(data, name):
        click.echo(visible(f"Signed out of '{name}'."))
    else:
        click.echo(visible(f"'{name}' had no sign-in."))
