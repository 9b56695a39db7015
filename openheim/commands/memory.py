"""`openheim memory …`: list, search, add, edit, forget, stats and reembed long-term memory notes.

The group takes its LongTermMemory from ``ctx.obj["ltm_factory"]()``, so the main CLI decides
how configuration is resolved.
"""

from __future__ import annotations

import contextlib
import functools
import json
import sys
from collections.abc import Callable
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

import click

from openheim.core.control_chars import visible
from openheim.errors import ConfigError, InvalidArgument, OpenheimError
from openheim.memory.tools import EMPTY_STORE, MAX_NOTE_CHARS, format_hits

if TYPE_CHECKING:
    from openheim.memory.long_term import LongTermMemory
    from openheim.memory.store import Hit, Memory

_JSON = click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
_PREVIEW = 100


def _ltm() -> LongTermMemory:
    ctx = click.get_current_context()
    obj = ctx.find_object(dict) or {}
    factory = obj.get("ltm_factory")
    if factory is None:
        raise click.ClickException("long-term memory is not set up for this command; run it as `openheim memory …`")
    ltm = factory()
    ctx.call_on_close(ltm.close)
    return ltm


class _ConfigProblem(click.ClickException):
    """A configuration or argument problem: one line, exit code 2 like the main CLI."""

    exit_code = 2


def _errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn openheim errors into one-line click errors: exit 2 for config problems, else 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except OpenheimError as e:
            line = " ".join(str(e).split())
            if isinstance(e, (ConfigError, InvalidArgument)):
                raise _ConfigProblem(line) from e
            raise click.ClickException(line) from e

    return wrapper


def _emit(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _memory_json(m: Memory) -> dict:
    return {"id": m.id, "content": m.content, "created_at": m.created_at.isoformat()}


def _hit_json(h: Hit) -> dict:
    return {
        "id": h.id,
        "content": h.content,
        "created_at": h.created_at.isoformat(),
        "score": round(h.score, 6),
        "score_kind": h.kind,
    }


def _preview(text: str) -> str:
    """The first line, cut to 100 characters; an ellipsis when anything was left out."""
    lines = text.strip().splitlines() or [""]
    if len(lines) == 1 and len(lines[0]) <= _PREVIEW:
        return lines[0]
    return lines[0][: _PREVIEW - 1].rstrip() + "…"


def _note_text(text: str, param: str) -> str:
    """The note text (``-`` reads stdin), trimmed and within the tool's limits."""
    if text == "-":
        text = sys.stdin.read()
    text = text.strip()
    if not text:
        raise click.BadParameter("the note is empty; give the text to store", param_hint=param)
    if len(text) > MAX_NOTE_CHARS:
        raise click.BadParameter(
            f"the note is {len(text)} characters; notes hold at most {MAX_NOTE_CHARS}, so split it into smaller notes",
            param_hint=param,
        )
    return text


@click.group("memory")
def memory() -> None:
    """Inspect and edit long-term memory (the notes the agent keeps across sessions)."""


@memory.command("list")
@click.option("--limit", type=click.IntRange(min=1), default=50, show_default=True, help="Notes to show.")
@click.option("--offset", type=click.IntRange(min=0), default=0, show_default=True, help="Notes to skip.")
@_JSON
@_errors
def list_cmd(limit: int, offset: int, as_json: bool) -> None:
    """List notes in the order they were stored."""
    notes = _ltm().list(limit, offset)
    if as_json:
        _emit([_memory_json(m) for m in notes])
    elif not notes:
        click.echo(visible("Long-term memory is empty." if offset == 0 else "No notes at that offset."))
    else:
        for m in notes:
            click.echo(visible(f"#{m.id}  {m.created_at:%Y-%m-%d}  {_preview(m.content)}"))


@memory.command("search")
@click.argument("query")
@click.option("-k", "--top-k", type=click.IntRange(min=1), default=None, help="Hits to show [default: top_k].")
@_JSON
@_errors
def search_cmd(query: str, top_k: int | None, as_json: bool) -> None:
    """Search notes by meaning (with embeddings) or by keyword."""
    ltm = _ltm()
    result = ltm.search_detailed(query, top_k)
    if as_json:
        _emit(
            {
                "query": query,
                "mode": result.mode,
                "reason": result.reason,
                "results": [_hit_json(h) for h in result.hits],
            }
        )
        return
    click.echo(visible(f"{result.mode} search: {result.reason}"), err=True)
    click.echo(visible(EMPTY_STORE if not result.hits and ltm.count() == 0 else format_hits(result.hits)))


@memory.command("add")
@click.argument("text")
@_JSON
@_errors
def add_cmd(text: str, as_json: bool) -> None:
    """Store TEXT as a new note (`-` reads it from stdin)."""
    memory_id = _ltm().remember(_note_text(text, "TEXT"))
    if as_json:
        _emit({"id": memory_id})
    else:
        click.echo(f"Remembered as memory #{memory_id}.")


@memory.command("edit")
@click.argument("memory_id", metavar="ID", type=int)
@click.argument("text")
@_JSON
@_errors
def edit_cmd(memory_id: int, text: str, as_json: bool) -> None:
    """Replace the text of note ID (`-` reads it from stdin)."""
    content = _note_text(text, "TEXT")
    if not _ltm().edit(memory_id, content):
        raise click.ClickException(f"No memory #{memory_id} exists; nothing to edit.")
    if as_json:
        _emit({"id": memory_id, "updated": True})
    else:
        click.echo(f"Updated memory #{memory_id}.")


@memory.command("forget")
@click.argument("memory_id", metavar="ID", type=int)
@_JSON
@_errors
def forget_cmd(memory_id: int, as_json: bool) -> None:
    """Delete note ID."""
    if not _ltm().forget(memory_id):
        raise click.ClickException(f"No memory #{memory_id} exists; nothing to forget.")
    if as_json:
        _emit({"id": memory_id, "forgotten": True})
    else:
        click.echo(f"Forgot memory #{memory_id}.")


@memory.command("stats")
@_JSON
@_errors
def stats_cmd(as_json: bool) -> None:
    """Show how many notes there are and how they are searched."""
    s = _ltm().stats()
    if as_json:
        _emit(asdict(s))
        return
    space = f"{s.model} ({s.dimensions} dimensions)" if s.model else "none yet"
    vectors = "available" if s.vectors_available else f"unavailable ({s.vectors_reason})"
    for label, value in (
        ("Database", s.path),
        ("Notes", s.memories),
        ("With vectors", s.embedded),
        ("Stored vectors", space),
        ("Embedding model", s.embedding_model or "none (keyword search)"),
        ("Vector search", vectors),
    ):
        click.echo(visible(f"{label + ':':<17}{value}"))


@memory.command("reembed")
@_JSON
@_errors
def reembed_cmd(as_json: bool) -> None:
    """Embed every note again with the configured embedding model."""
    ltm = _ltm()
    if as_json:
        result = ltm.reembed()
        _emit({"embedded": result.embedded, "skipped": result.skipped})
        return
    with contextlib.ExitStack() as stack:
        bars: list[Any] = []

        def progress(done: int, total: int) -> None:
            if not bars:  # opened on the first batch, so a failure before it prints no bar
                bars.append(
                    stack.enter_context(click.progressbar(length=total, label="Re-embedding notes", file=sys.stderr))
                )
            bars[0].update(done - bars[0].pos)

        result = ltm.reembed(progress)
    click.echo(visible(f"Re-embedded {result.embedded} note{'s' if result.embedded != 1 else ''}."))
    if result.skipped:
        ids = ", ".join(f"#{i}" for i in result.skipped)
        click.echo(visible(f"The embeddings provider refused {len(result.skipped)} note(s), left keyword-only: {ids}"))
