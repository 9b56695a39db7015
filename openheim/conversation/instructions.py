"""Project instructions: the ``AGENTS.md`` files from the sandbox root down to the session's cwd.

Each directory on the way contributes its ``AGENTS.md``, or its ``CLAUDE.md`` when it has no ``AGENTS.md``;
outermost first. Blank files are skipped, unreadable ones skipped with a warning, and each file is capped at
64 KiB so one huge file cannot fill the context window. Subagents do not get these.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from openheim.config.bounded_read import open_regular, read_at_most
from openheim.config.project_settings import directories

log = logging.getLogger(__name__)

FILE_NAMES = ("AGENTS.md", "CLAUDE.md")
MAX_BYTES = 64 * 1024


@dataclass
class Instruction:
    """One instructions file: its path relative to the sandbox root (POSIX style) and its text."""

    relpath: str
    content: str


def load_instructions(sandbox_root: Path | str, cwd: Path | str | None = None) -> list[Instruction]:
    """Every instructions file from ``sandbox_root`` down to ``cwd``, outermost first."""
    root = Path(os.path.realpath(sandbox_root))
    found: list[Instruction] = []
    for directory in directories(root, Path(cwd) if cwd is not None else None):
        path = _pick(directory)
        if path is None:
            continue
        content = _read(path)
        if content is not None and content.strip():
            found.append(Instruction(path.relative_to(root).as_posix(), content))
    return found


def _pick(directory: Path) -> Path | None:
    for name in FILE_NAMES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def _read(path: Path) -> str | None:
    try:  # a FIFO or device named AGENTS.md is refused unread; never more than MAX_BYTES + 1 bytes
        fd = open_regular(path)
        try:
            data = read_at_most(fd, MAX_BYTES + 1)
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("skipping unreadable instructions file %s: %s", path, e)
        return None
    text = data[:MAX_BYTES].decode("utf-8", "ignore" if len(data) > MAX_BYTES else "replace")
    if len(data) > MAX_BYTES:
        text += f"\n[instructions truncated: showing the first {MAX_BYTES} bytes of {path.name}]"
    return text
