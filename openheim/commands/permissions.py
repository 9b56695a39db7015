"""`openheim permissions explain TOOL ARGS_JSON`: which permission rule decides a call, and why;
`openheim permissions trust/untrust`: whether a project's .openheim/settings.toml allow rules apply."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.client import OpenheimClient
from openheim.config.hooks import hooks_for
from openheim.config.load import data_dir, load_config
from openheim.config.project_hooks import load_project_hooks
from openheim.config.project_settings import TRUST_FILE, settings_files, trust_file, untrust_file
from openheim.config.rules import ALLOW, DENY, MAIN_ARGUMENTS, PROJECT_ALLOW, Verdict, exposed_tool_name
from openheim.config.trust import pinned_files, real_path
from openheim.core.control_chars import visible
from openheim.errors import ConfigError, InvalidArgument, OpenheimError

if TYPE_CHECKING:
    from openheim.client import OpenheimClient


@click.group()
def permissions() -> None:
    """Permission rules: see what they decide, trust a project's rules (docs/pipelines.md)."""


def fallback(policy: str, read_only: bool) -> str:
    """What ``--approve policy`` does with a call no rule decided."""
    if policy == "all" or (policy == "reads" and read_only):
        return f"falls through to --approve {policy}: allowed"
    why = "no tool may run" if policy == "none" else "the tool is not read-only"
    return f"falls through to --approve {policy}: denied ({why})"


def describe(verdict: Verdict, policy: str, read_only: bool) -> list[str]:
    """The lines ``explain`` prints: the decision, the rule (if one decided) and why."""
    if verdict.outcome == DENY:
        decision = "denied by rule"
    elif verdict.outcome == ALLOW:
        decision = "allowed by rule"
    elif verdict.outcome == PROJECT_ALLOW and policy != "none":
        decision = "allowed by a project rule"
    elif verdict.outcome == PROJECT_ALLOW:
        decision = "denied: project allow rules do not apply under --approve none"
    elif read_only and policy != "none":
        decision = f"allowed: read-only, no rule decides it ({fallback(policy, True)})"
    else:
        decision = fallback(policy, read_only)
    lines = [f"decision: {decision}"]
    if verdict.rule is not None:
        lines.append(f"rule: {verdict.rule} (from {verdict.rule.source})")
    lines.append(f"why: {verdict.reason}")
    if len(verdict.parts) > 1:
        lines.append("parts: " + " | ".join(verdict.parts))
    return lines


@permissions.command()
@click.argument("tool")
@click.argument("args_json")
@click.option("--allow", "allow", multiple=True, metavar="RULE", help="An allow rule, as with `openheim run`.")
@click.option("--deny", "deny", multiple=True, metavar="RULE", help="A deny rule, as with `openheim run`.")
@click.option(
    "--approve",
    type=click.Choice(["all", "reads", "none"]),
    default="all",
    show_default=True,
    help="The --approve policy a call no rule decides falls back to.",
)
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="The session directory whose project settings apply (default: the current directory).",
)
@click.pass_context
def explain(
    ctx: click.Context,
    tool: str,
    args_json: str,
    allow: tuple[str, ...],
    deny: tuple[str, ...],
    approve: str,
    cwd: str | None,
) -> None:
    """Print which rule decides a call of TOOL with ARGS_JSON (a JSON object), and why."""
    args = _json_object(args_json)
    tool = exposed_tool_name(tool)  # everything-http__echo, mcp__everything-http__echo: as the model sees it
    where = Path(cwd) if cwd else Path.cwd()
    with _client(ctx, allow, deny) as client:
        offered, read_only = _offered(client, tool, where)
        if tool not in offered and tool not in MAIN_ARGUMENTS:
            raise InvalidArgument(
                f"unknown tool '{tool}' (offered: {', '.join(sorted(offered))}; MCP tools are named server__tool)"
            )
        verdict = client.explain_permission(tool, args, Path(cwd) if cwd else None)
        hooks = _pre_tool_hooks(ctx, client.data_dir, tool, args, where)
    _print_explanation(tool, args, hooks, describe(verdict, approve, read_only))
    if tool not in offered and tool != "delegate_task":  # delegate_task is added to each session
        click.echo(
            visible(
                f"note: {tool} is not offered by this configuration"
                + (" (allow_shell = false)" if tool == "execute_command" else "")
            )
        )


def _json_object(text: str) -> dict:
    """ARGS_JSON as an object; a one-line error saying what to pass otherwise."""

    try:
        args = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgument(
            f"ARGS_JSON is not valid JSON ({e.msg} at column {e.colno}); "
            'pass an object such as \'{"path": "src/a.py"}\''
        ) from None
    if not isinstance(args, dict):
        raise InvalidArgument('ARGS_JSON must be a JSON object such as \'{"path": "src/a.py"}\'')
    return args


def _client(ctx: click.Context, allow: tuple[str, ...], deny: tuple[str, ...]) -> OpenheimClient:

    builder = (
        OpenheimClient.builder()
        .config_path(ctx.obj.get("config_path") if ctx.obj else None)
        .mcp_config(ctx.obj.get("mcp_config") if ctx.obj else None)
        .permissions(allow, deny, "command line")
        .check_model(False)
    )
    return builder.build()


def _print_explanation(tool: str, args: dict, hooks: list, lines: list[str]) -> None:
    click.echo(visible(f"{tool} {json.dumps(args, ensure_ascii=False)}"))
    for hook in hooks:
        click.echo(
            visible(
                f"hook: {hook.describe()} is asked first: it can allow, deny (a deny rule still wins over its "
                "allow), ask, or rewrite the arguments"
            )
        )
    for line in lines:
        click.echo(visible(line + (" (unless a hook above decides)" if hooks and line.startswith("decision:") else "")))


def _offered(client: OpenheimClient, tool: str, cwd: Path) -> tuple[set[str], bool]:
    """The tools a session in ``cwd`` is offered (with its trusted project's MCP servers, waited for up to
    10 s when ``tool`` is an MCP tool) and whether ``tool`` is read-only."""
    if "__" not in tool:
        offered = {t.name for t in client.tools()}
        return offered, tool in offered and client.tool_capabilities(tool).read_only
    session = client.new_session(cwd=cwd)
    try:
        session.mcp_servers(wait=10)
        tools = {t.name for t in session.tools()}
        return tools, tool in tools and session.tool_capabilities(tool).read_only
    finally:
        session.close()


def _project_files(ctx: click.Context, file: str | None, cwd: str | None) -> tuple[Path, list[Path]]:
    """(data dir, the settings files meant): FILE, else every .openheim/settings.toml from the sandbox root
    (the configured work_dir, else the session directory) down to the session directory."""
    obj = ctx.find_object(dict) or {}
    try:
        config = load_config(obj.get("config_path"))
    except OpenheimError:
        config = None
    here = Path(cwd) if cwd else Path.cwd()
    if file:
        return data_dir(config), [Path(file)]
    root = Path(config.work_dir) if config is not None and config.work_dir else here
    found = settings_files(root, here)
    if not found:
        raise InvalidArgument(f"no .openheim/settings.toml from {root} down to {here}; give the file's path")
    return data_dir(config), found


@permissions.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="The session directory whose project settings to trust (default: the current directory).",
)
@click.pass_context
def trust(ctx: click.Context, file: str | None, cwd: str | None) -> None:
    """Let a project's .openheim/settings.toml allow tool calls (default: every one that applies here).

    Its allow rules approve calls without asking, so read them first; until you trust the file only its
    deny rules apply, and any later change to it needs trusting again.
    """

    data_dir, files = _project_files(ctx, file, cwd)
    for path in files:
        if not path.is_file():
            raise ConfigError(f"{path} does not exist; give the path of a .openheim/settings.toml")
        sha, rules = trust_file(data_dir, path)
        click.echo(visible(f"Trusted {real_path(path)} (sha256 {sha[:12]}…)."))
        click.echo(visible("  allows: " + (", ".join(str(r) for r in rules.allow) or "(nothing)")))
        if rules.deny:
            click.echo(visible("  denies: " + ", ".join(str(r) for r in rules.deny)))
        pinned = pinned_files(data_dir / TRUST_FILE, path)
        if pinned:
            click.echo(visible("  its hooks run (a change to one needs trusting again): " + ", ".join(pinned)))
    click.echo("Its allow rules now apply in sessions here; if the file changes, trust it again.")


@permissions.command()
@click.argument("file", required=False, type=click.Path(dir_okay=False))
@click.option(
    "--cwd",
    type=click.Path(exists=True, file_okay=False, resolve_path=True),
    help="The session directory whose project settings to untrust (default: the current directory).",
)
@click.pass_context
def untrust(ctx: click.Context, file: str | None, cwd: str | None) -> None:
    """Stop a project's .openheim/settings.toml from allowing tool calls (its deny rules still apply)."""
    data_dir, files = _project_files(ctx, file, cwd)
    for path in files:
        done = untrust_file(data_dir, path)
        click.echo(visible(f"{real_path(path)} {'is no longer trusted' if done else 'was not trusted'}."))


def _pre_tool_hooks(ctx: click.Context, data_dir: Path, tool: str, args: dict, cwd: Path) -> list:
    """The pre_tool hooks (the user's and the trusted project files') that would be asked about this call."""
    import os

    config = load_config(ctx.obj.get("config_path") if ctx.obj else None)
    root = Path(os.path.realpath(config.work_dir or cwd))
    hooks = config.hooks + load_project_hooks(root, cwd, data_dir)
    return hooks_for(hooks, "pre_tool", tool, args, str(root), str(cwd))
