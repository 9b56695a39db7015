"""The ripgrep engine for search: used for patterns that mean the same in rg and Python's re.

The file list (ignore rules, hidden, caps) is always built in Python; rg only matches lines in
those files, and files rg matched are re-checked for NUL bytes and UTF-8 so both engines skip
the same binary files. Python opens every file (no symlink followed anywhere below the root) and
hands rg the open descriptors as /proc/self/fd/N, so rg reads exactly the files Python checked.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import TYPE_CHECKING

from openheim.core.child_env import child_environ
from openheim.errors import ToolExecutionError
from openheim.tools.search_files import MAX_MATCHES, Match, SearchFiles

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken

_PUNCT_ESCAPES = set("\\.+*?()|[]{}^$#&-~")  # what rg 13 (regex-syntax 0.6) may escape
_MAX_BATCH = 2048  # files (open descriptors) per rg run, within half the descriptor limit
_FD_DIR = "/proc/self/fd"


def _class_items(pattern: str, j: int) -> tuple[list[str], int] | None:
    """The members of a class body starting at pattern[j] (escapes kept whole) and the index of its ']'."""
    items: list[str] = []
    while j < len(pattern) and pattern[j] != "]":
        c = pattern[j]
        if c == "[" or pattern.startswith(("&&", "--", "~~"), j):
            return None
        if c == "\\":
            if j + 1 >= len(pattern) or pattern[j + 1] not in _PUNCT_ESCAPES:
                return None
            c = pattern[j : j + 2]
        items.append(c)
        j += len(c)
    return (items, j) if j < len(pattern) else None


def _plain_ranges(items: list[str]) -> bool:
    """Every bare '-' is first, last, or joins two single characters into one range (no a-c-e)."""
    k, n = 0, len(items)
    while k < n:
        if k + 2 < n and items[k + 1] == "-" and "-" not in (items[k], items[k + 2]):
            k += 3
            if k < n - 1 and items[k] == "-":
                return False
            continue
        if items[k] == "-" and 0 < k < n - 1:
            return False
        k += 1
    return True


def _class_end(pattern: str, i: int) -> int | None:
    """Index just past a plain ``[...]`` class at pattern[i], or None if it uses anything unusual."""
    j = i + 1
    if j < len(pattern) and pattern[j] == "^":
        j += 1
    if j < len(pattern) and pattern[j] == "]":
        return None
    parsed = _class_items(pattern, j)
    if parsed is None or not _plain_ranges(parsed[0]):
        return None
    return parsed[1] + 1


def _repeat_end(pattern: str, i: int) -> int | None:
    """Index just past a ``{n}``, ``{n,}`` or ``{n,m}`` repetition at pattern[i], else None."""
    j = pattern.find("}", i)
    if j < 0:
        return None
    low, _comma, high = pattern[i + 1 : j].partition(",")
    if not low.isdigit() or (high and not high.isdigit()) or not low.isascii() or not high.isascii():
        return None
    return j + 1


_POSSESSIVE = ("*+", "++", "?+", "}+")  # possessive in Python 3.11, nested repetition in rg


def is_portable(pattern: str) -> bool:
    """True when the pattern uses only syntax that rg and Python's re read the same way."""
    if any(token in pattern for token in _POSSESSIVE):
        return False
    i, n, after_atom = 0, len(pattern), False
    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n or (pattern[i + 1] not in _PUNCT_ESCAPES and pattern[i + 1] != "t"):
                return False
            i, after_atom = i + 2, True
        elif c == "[":
            end = _class_end(pattern, i)
            if end is None:
                return False
            i, after_atom = end, True
        elif c == "{":
            end = _repeat_end(pattern, i) if after_atom else None
            if end is None:
                return False
            i = end
        elif c == "(":
            if pattern.startswith("(?", i) and not pattern.startswith("(?:", i):
                return False
            i, after_atom = i + (3 if pattern.startswith("(?:", i) else 1), False
        elif c == "}" or ord(c) < 0x20:
            return False
        else:
            after_atom = c not in "|^"
            i += 1
    return True


def rg_binary() -> str | None:
    """The rg to run: the one on PATH, else one beside this Python interpreter.

    ``pip install ripgrep`` puts rg in the environment's bin/ (Scripts\\ on Windows), next to the
    interpreter, and that directory is not on PATH unless the environment is activated: a venv's
    ``.venv/bin/openheim`` or a pipx install would otherwise never find the rg installed with it.
    """
    found = shutil.which("rg")
    if found or not sys.executable or not os.path.isabs(sys.executable):
        return found
    beside = os.path.join(os.path.dirname(sys.executable), "rg.exe" if os.name == "nt" else "rg")
    return beside if os.path.isfile(beside) and os.access(beside, os.X_OK) else None


def usable(pattern: str, required: bool = False) -> bool:
    """Whether the rg engine may run this pattern (``required`` raises when rg is missing)."""
    if rg_binary() is None:
        if required:
            raise ToolExecutionError(
                "search needs ripgrep (rg) on PATH or beside the Python interpreter for use_rg=True"
            )
        return False
    return is_portable(pattern) and os.path.isdir(_FD_DIR)


def _parse(output: bytes, index_of: dict[bytes, int]) -> list[Match]:
    """rg ``--null --line-number`` output to (file index, line, trimmed text), sorted."""
    found = []
    for record in output.split(b"\n"):
        path, sep, rest = record.partition(b"\0")
        if not sep:
            continue
        number, _, text = rest.partition(b":")
        found.append((index_of[path], int(number), text.decode("utf-8", "replace").rstrip()))
    found.sort(key=lambda m: (m[0], m[1]))
    return found


def _run_rg(args: list[str], fds: list[int], cancel: CancelToken | None) -> bytes | None:
    """rg's stdout, or None when rg failed (the caller falls back to Python)."""
    proc = subprocess.Popen(
        args,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        pass_fds=fds,
        env=child_environ(),
    )
    remove = cancel.on_cancel(proc.kill) if cancel is not None else (lambda: None)
    try:
        out, _ = proc.communicate()
    finally:
        remove()
    if cancel is not None and cancel.cancelled:
        raise ToolExecutionError("search cancelled")
    return out if proc.returncode in (0, 1) else None


def _keep_text_files(found: list[Match], files: SearchFiles, fds: dict[int, int]) -> list[Match]:
    """Drop matches in files Python would skip (NUL bytes, not UTF-8, too big)."""
    verdict: dict[int, bool] = {}
    kept = []
    for match in found:
        index = match[0]
        if index not in verdict:
            verdict[index] = files.text(index, fds[index]) is not None
        if verdict[index]:
            kept.append(match)
    return kept


def _search_batch(base: list[str], files: SearchFiles, group: range, cancel: CancelToken | None) -> list[Match] | None:
    fds: dict[int, int] = {}
    try:
        for index in group:
            fd = files.open(index)
            if fd is not None:
                fds[index] = fd
        if not fds:
            return []
        names = {index: f"{_FD_DIR}/{fd}" for index, fd in fds.items()}
        out = _run_rg(base + list(names.values()), list(fds.values()), cancel)
        if out is None:
            return None
        index_of = {os.fsencode(name): index for index, name in names.items()}
        return _keep_text_files(_parse(out, index_of), files, fds)
    finally:
        for fd in fds.values():
            os.close(fd)


def _batch_size() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return _MAX_BATCH if soft == resource.RLIM_INFINITY else max(16, min(_MAX_BATCH, soft // 2 - 32))


def rg_search(
    files: SearchFiles, pattern: str, case_insensitive: bool, cancel: CancelToken | None
) -> list[Match] | None:
    """Matches in file order (stopping after MAX_MATCHES), or None if rg could not run the search."""
    rg = rg_binary()
    if rg is None:
        return None
    base = [
        rg,
        "--no-config",
        "--no-heading",
        "--with-filename",
        "--line-number",
        "--null",
        "--color",
        "never",
        "--text",
        "--no-messages",
        "--no-ignore",
        "--hidden",
        "--encoding",
        "none",
        "--max-count",
        str(MAX_MATCHES + 1),
    ]
    base += (["--ignore-case"] if case_insensitive else []) + ["-e", pattern, "--"]
    found: list[Match] = []
    total, size = len(files.paths), _batch_size()
    for start in range(0, total, size):
        batch = _search_batch(base, files, range(start, min(start + size, total)), cancel)
        if batch is None:
            return None
        found.extend(batch)
        if len(found) > MAX_MATCHES:
            break
    return found
