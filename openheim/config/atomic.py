"""Replacing a small file of openheim's own (config.toml, settings, trust records) atomically: readers see
the old content or the new, never a half-written file. It goes through the workspace writer: a temporary
created O_EXCL|O_NOFOLLOW beside it, its mode set on the descriptor, renamed over the target relative
to the directory's descriptor; a link at the target is replaced, never written through."""

from __future__ import annotations

from pathlib import Path

from openheim.config.private_data import FILE_MODE
from openheim.config.workspace_write import write_in_dir


def replace_text(path: Path, text: str, mode: int | None = FILE_MODE) -> None:
    """Write ``text`` over ``path`` with ``mode`` (default 0600: openheim's own files are private;
    None keeps the old file's mode)."""
    write_in_dir(path, text.encode("utf-8"), mode=mode)
