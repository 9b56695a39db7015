"""Walk a sandbox root the way checkpoints see it: regular files only, .git and ignored paths left out (pure I/O).

Ignore rules are the root's ``.gitignore`` and ``.ignore`` files (at every level), read with the search tool's
parser; a path is relative to the root with ``/`` separators. Symlinks are not followed and not recorded.
"""
from __future__ import annotations

import os
import stat
from dataclasses import dataclass

from openheim.tools.ignore import RuleSet, is_ignored

IGNORE_FILES = (".gitignore", ".ignore")
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


@dataclass(frozen=True)
class FileStat:
    """What a scan learns about one file without reading it."""

    size: int
    mtime_ns: int
    ino: int
    mode: int


class TooManyFiles(Exception):
    """The root holds more files than a checkpoint may cover."""


def scan(root: str, max_files: int, skip: frozenset[str] = frozenset()) -> dict[str, FileStat]:
    """Every regular file under ``root`` that is not ignored, by relative path; ``skip`` holds absolute
    directories left out (the data dir when it lies inside the root)."""
    found: dict[str, FileStat] = {}
    stack: list[tuple[str, str, list[RuleSet]]] = [(root, "", [])]
    while stack:
        directory, rel_dir, levels = stack.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        names = {e.name for e in entries}
        levels = _with_rules(directory, rel_dir, names, levels)
        for entry in entries:
            rel = f"{rel_dir}/{entry.name}" if rel_dir else entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if entry.name in ALWAYS_SKIPPED or entry.path in skip:
                        continue
                    if levels and is_ignored(levels, "/" + rel, True):
                        continue
                    stack.append((entry.path, rel, levels))
                    continue
                if not entry.is_file(follow_symlinks=False):
                    continue
                if levels and is_ignored(levels, "/" + rel, False):
                    continue
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            found[rel] = FileStat(st.st_size, st.st_mtime_ns, st.st_ino, stat.S_IMODE(st.st_mode))
            if len(found) > max_files:
                raise TooManyFiles(root)
    return found


def _with_rules(directory: str, rel_dir: str, names: set[str], levels: list[RuleSet]) -> list[RuleSet]:
    """``levels`` plus this directory's ignore files (read only when the listing shows them)."""
    added = list(levels)
    for name in IGNORE_FILES:
        if name not in names:
            continue
        try:
            with open(os.path.join(directory, name), encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        rules = RuleSet("/" + rel_dir if rel_dir else "", text)
        if rules.rules:
            added.append(rules)
    return added
