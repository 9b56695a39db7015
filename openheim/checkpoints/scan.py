"""Walk a sandbox root the way checkpoints see it: regular files only, .git and ignored paths left out (pure I/O).

Ignore rules are the root's ``.gitignore`` and ``.ignore`` files (at every level), read with the search tool's
parser; a path is relative to the root with ``/`` separators. Symlinks are not followed and not recorded.
"""

from __future__ import annotations

import os

from openheim.tools.ignore import RuleSet, is_ignored

IGNORE_FILES = (".gitignore", ".ignore")
ALWAYS_SKIPPED = frozenset({".git", ".hg", ".svn"})


# What a scan learns about one file without reading it: (size, mtime_ns, inode, mode). A plain tuple: 10,000 of
# them are made per scan, and a scan's result is fingerprinted with marshal, which takes only built-in types.
FileStat = tuple[int, int, int, int]


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
        if any(e.name in IGNORE_FILES for e in entries):
            levels = _with_rules(directory, rel_dir, {e.name for e in entries}, levels)
        prefix = f"/{rel_dir}/" if rel_dir else "/"  # the paths ignore rules see start with "/"
        for entry in entries:
            name = entry.name
            try:
                if entry.is_dir(follow_symlinks=False):
                    if name in ALWAYS_SKIPPED or entry.path in skip:
                        continue
                    if levels and is_ignored(levels, prefix + name, True):
                        continue
                    stack.append((entry.path, (prefix + name)[1:], levels))
                elif entry.is_file(follow_symlinks=False):
                    path = prefix + name
                    if levels and is_ignored(levels, path, False):
                        continue
                    st = entry.stat(follow_symlinks=False)
                    found[path[1:]] = (st.st_size, st.st_mtime_ns, st.st_ino, st.st_mode & 0o7777)
            except OSError:
                continue
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
