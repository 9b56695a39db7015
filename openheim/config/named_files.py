"""The workspace files a command names: what a trusted hook or project MCP server runs besides itself.

A trusted ``sh scripts/lint.sh`` runs whatever ``scripts/lint.sh`` holds when it starts, and the sandboxed
model can rewrite that file; so the files a command names inside its project are hashed into the trust
record with the settings file (``config.trust``), and a change needs trusting again. A word names a file
when, with ``$OPENHEIM_PROJECT_DIR``/``$CLAUDE_PROJECT_DIR`` (also in braces) read as the project directory
and a relative path read from it, it is a regular file inside the project (``--opt=path`` counts too).
Files those files load in turn are not followed.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Iterable
from pathlib import Path

from openheim.config.shell_split import shell_words, split_command

_PROJECT_VARS = re.compile(r"\$(?:\{(?:OPENHEIM|CLAUDE)_PROJECT_DIR\}|(?:OPENHEIM|CLAUDE)_PROJECT_DIR\b)")
MAX_HASHED = 64 << 20  # bytes of a named file that are hashed (a bigger one is hashed as its first 64 MiB)


def _candidates(word: str) -> list[str]:
    return [word, word.split("=", 1)[1]] if word.startswith("-") and "=" in word else [word]


def _inside(word: str, project: Path) -> Path | None:
    text = _PROJECT_VARS.sub(lambda m: str(project), word)
    if not text or "$" in text or "\0" in text:
        return None
    full = Path(os.path.realpath(project / os.path.expanduser(text)))
    if full != project and project not in full.parents:
        return None
    return full if full.is_file() else None


def _named(word: str, project: Path) -> list[Path]:
    """The files ``word`` names. ``$OPENHEIM_PROJECT_DIR`` is the sandbox root when the command runs, which
    may be above ``project`` (a settings file in a subdirectory): every enclosing directory is tried."""
    bases = [project, *project.parents] if _PROJECT_VARS.search(word) else [project]
    return [p for base in bases if (p := _inside(word, base)) is not None]


def command_files(words: Iterable[str], project: Path) -> list[Path]:
    """The files inside ``project`` (for a ``$OPENHEIM_PROJECT_DIR`` word: an enclosing directory) that these
    argv words name."""
    project = Path(os.path.realpath(project))
    found = (p for word in words for c in _candidates(word) for p in _named(c, project))
    return list(dict.fromkeys(found))


def shell_files(command: str, project: Path) -> list[Path]:
    """The files inside ``project`` that a shell command line names (every simple command's words)."""
    parts = split_command(command) or []
    return list(dict.fromkeys(p for part in parts for p in command_files(shell_words(part.raw), project)))


def file_digest(path: Path) -> str | None:
    """SHA-256 of a file's content (its first MAX_HASHED bytes); None when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read(MAX_HASHED)).hexdigest()
    except OSError:
        return None


def digests(paths: Iterable[Path]) -> dict[str, str]:
    """``{real path: sha256}`` of the readable ones."""
    out = {}
    for path in paths:
        sha = file_digest(path)
        if sha is not None:
            out[str(path)] = sha
    return out


def first_changed(files: dict[str, str]) -> str | None:
    """The first of ``{path: sha256}`` whose content is no longer that (or that is gone), else None."""
    return next((path for path, sha in files.items() if file_digest(Path(path)) != sha), None)
