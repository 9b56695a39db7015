"""How a tool call is shown (plain data every layer shares), loaded with the first call to show: a prompt
that calls no tool never needs it. What may be assumed about a tool is in core.capabilities."""

from __future__ import annotations

from dataclasses import dataclass

TITLE_CHARS = 200


@dataclass(frozen=True)
class Location:
    """A file a tool call touches (absolute path, 1-based line)."""

    path: str
    line: int | None = None


@dataclass(frozen=True)
class DiffPreview:
    """What a file-changing call will do: the old text (None for a new file) and the new text."""

    path: str
    old_text: str | None
    new_text: str


@dataclass(frozen=True)
class ToolView:
    """How every front end shows a tool call: a title naming what it touches, its kind, files, diff, command."""

    title: str
    kind: str = "other"
    locations: tuple[Location, ...] = ()
    diff: DiffPreview | None = None
    command: str | None = None  # the shell command a permission prompt shows
    read_only: bool = False  # filled in by the executor from the tool's capabilities


def short(text: object, limit: int = TITLE_CHARS) -> str:
    """One line of at most ``limit`` characters (for titles)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"
