"""`openheim sessions list|show|delete`: stored conversations from the command line."""
from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.core.models import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    transcript,
)

if TYPE_CHECKING:
    from openheim.conversation.history import HistoryManager


def _history(ctx: click.Context) -> HistoryManager:
    from openheim.config.load import config_path, data_dir, load_config
    from openheim.conversation.history import HistoryManager

    explicit = ctx.obj.get("config_path") if ctx.obj else None
    config = load_config(explicit) if explicit or config_path().exists() else None
    return HistoryManager(data_dir(config) / "history")


def _dumps(obj: object) -> str:
    return json.dumps(obj, ensure_ascii=False, indent=2)


@click.group()
def sessions() -> None:
    """List, show and delete stored conversations."""


@sessions.command("list")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.option("--cwd", help="Only sessions started in this directory.")
@click.option("--all", "show_all", is_flag=True, help="Also sessions whose first turn failed before any reply.")
@click.pass_context
def list_sessions(ctx: click.Context, as_json: bool, cwd: str | None, show_all: bool) -> None:
    """Stored sessions, newest first (sessions that never got a reply: with --all)."""
    metas = _history(ctx).list(include_failed=show_all)
    if cwd:
        metas = [m for m in metas if m.cwd == str(Path(cwd).absolute())]
    if as_json:
        click.echo(_dumps([m.to_dict() for m in metas]))
        return
    if not metas:
        click.echo("no sessions yet", err=True)
    for m in metas:
        title = (m.title or "(untitled)").replace("\n", " ")[:60]
        failed = "  (failed: no reply)" if m.failed else ""
        click.echo(f"{m.id}  {m.updated_at[:19].replace('T', ' ')}  {title}  [{m.provider or '?'}/{m.model or '?'}]"
                   f"{failed}")


@sessions.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (meta and messages).")
@click.pass_context
def show_session(ctx: click.Context, session_id: str, as_json: bool) -> None:
    """Print one session's transcript."""
    history = _history(ctx)
    conv = history.load(history.resolve_id(session_id))
    if as_json:
        click.echo(_dumps({"meta": conv.meta.to_dict(), "messages": [m.to_dict() for m in conv.messages]}))
        return
    click.echo(render_transcript(conv.messages))


def render_transcript(messages: list[Message]) -> str:
    """The displayable entries as plain text."""
    lines: list[str] = []
    for role, block in transcript(messages):
        if isinstance(block, TextBlock):
            lines.append(f"{role}: {block.text}")
        elif isinstance(block, ThinkingBlock):
            lines.append(f"  (thinking) {block.thinking}")
        elif isinstance(block, ToolUseBlock):
            lines.append(f"  ⚙ {block.name} {block.arguments}")
        elif isinstance(block, ToolResultBlock):
            mark = "✗" if block.is_error else "→"
            first = block.content.splitlines()[:5]
            lines.extend(f"    {mark} {line}" for line in first or [""])
        else:
            lines.append(f"{role}: [image {getattr(block, 'mime_type', '')}]")
    return "\n".join(lines)


@sessions.command("delete")
@click.argument("session_id")
@click.pass_context
def delete_session(ctx: click.Context, session_id: str) -> None:
    """Delete a stored session."""
    history = _history(ctx)
    full = history.resolve_id(session_id)
    history.delete(full)
    click.echo(f"deleted {full}")
