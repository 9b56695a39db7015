"""`openheim sessions list|show|delete`: stored conversations from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from openheim.checkpoints.store import CheckpointStore
from openheim.client import OpenheimClient
from openheim.config.load import config_path, data_dir, load_config
from openheim.conversation.history import HistoryManager
from openheim.core.control_chars import visible
from openheim.core.models import (
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    transcript,
)
from openheim.errors import OpenheimError

INTERRUPTED = "\n\n[Reply interrupted: "  # the mark core.agent appends to a reply cut short

if TYPE_CHECKING:
    from openheim.conversation.history import HistoryManager


def _history(ctx: click.Context) -> HistoryManager:
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
        line = f"{m.id}  {m.updated_at[:19].replace('T', ' ')}  {title}  [{m.provider or '?'}/{m.model or '?'}]{failed}"
        click.echo(visible(line, one_line=True))


@sessions.command("show")
@click.argument("session_id")
@click.option("--json", "as_json", is_flag=True, help="Print JSON (meta, messages, compactions).")
@click.option("--changes", is_flag=True, help="List each turn's changed files instead of the transcript.")
@click.pass_context
def show_session(ctx: click.Context, session_id: str, as_json: bool, changes: bool) -> None:
    """Print one session's transcript (the full record, with each compaction where it happened)."""
    history = _history(ctx)
    conv = history.load(history.resolve_id(session_id))
    if changes:
        _show_changes(history.dir.parent, conv.id, as_json)
        return
    if as_json:
        click.echo(
            _dumps(
                {
                    "meta": conv.meta.to_dict(),
                    "messages": [m.to_dict() for m in conv.messages],
                    "compactions": [c.to_dict() for c in conv.compactions],
                }
            )
        )
        return
    click.echo(visible(render_with_compactions(conv.messages, conv.compactions)))


def _show_changes(data_dir: Path, session_id: str, as_json: bool) -> None:
    records = CheckpointStore(data_dir / "checkpoints").turns(session_id)
    if as_json:
        click.echo(_dumps([{**r.to_dict(), "undone": r.undone} for r in records]))
        return
    if not records:
        click.echo("no file changes recorded for this session", err=True)
    for r in records:
        state = "  (undone)" if r.undone else ""
        click.echo(visible(f"turn {r.turn} (message {r.at + 1}) in {r.root}: {len(r.changes)} file(s){state}"))
        for c in r.changes:
            mark = {"added": "A", "modified": "M", "deleted": "D"}.get(c.kind, "?")
            note = "" if c.restorable else "  (not restorable: too big to checkpoint, over max_file_bytes)"
            click.echo(visible(f"  {mark} {c.path}{note}", one_line=True))


def render_with_compactions(messages: list[Message], compactions: list) -> str:
    """The transcript, with a marker and the summary wherever the conversation was compacted."""
    parts: list[str] = []
    start = 0
    for record in sorted(compactions, key=lambda c: c.at):
        parts.append(render_transcript(messages[start : record.at]))
        start = max(start, record.at)
        how = "by hand" if record.manual else "automatically"
        parts.append(
            f"── compacted {how}: messages 1-{record.keep_from} summarised by {record.model or 'the model'}; "
            f"from here the model sees this summary instead ──\n{record.summary}\n── end of summary ──"
        )
    parts.append(render_transcript(messages[start:]))
    return "\n".join(p for p in parts if p)


def render_transcript(messages: list[Message]) -> str:
    """The displayable entries as plain text."""
    lines: list[str] = []
    for role, block in transcript(messages):
        if isinstance(block, TextBlock) and block.text.startswith(INTERRUPTED):
            lines.append(f"  (note) {block.text.strip().strip('[]')}")  # under the reply it cut short
        elif isinstance(block, TextBlock):
            lines.append(f"{role}: {block.text.rstrip()}")
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


@sessions.command("compact")
@click.argument("session_id")
@click.pass_context
def compact_session(ctx: click.Context, session_id: str) -> None:
    """Summarise a stored session now, so its next turn starts from the summary plus the recent turns."""
    with OpenheimClient.builder().config_path(ctx.obj.get("config_path") if ctx.obj else None).build() as client:
        handle, _ = client.resume_session(session_id)
        outcome = handle.compact()
    if outcome.record is None:
        raise OpenheimError(f"the session was not compacted: {outcome.error}; its history is unchanged")
    usage = outcome.usage.total if outcome.usage is not None else 0
    click.echo(
        f"compacted {session_id}: {outcome.record.keep_from} messages summarised "
        f"({len(outcome.record.summary)} characters, {usage} tokens for the summary call)"
    )


@sessions.command("delete")
@click.argument("session_id")
@click.pass_context
def delete_session(ctx: click.Context, session_id: str) -> None:
    """Delete a stored session."""
    history = _history(ctx)
    full = history.resolve_id(session_id)
    history.delete(full)
    click.echo(f"deleted {full}")
