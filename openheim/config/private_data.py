"""openheim's data directory is private: 0700 directories and 0600 files, whatever the umask.

It holds conversations, checkpoint copies of workspace files, config.toml (which may hold an api_key) and
sign-in tokens. ``make_private`` creates it (and any directory in it) 0700; ``repair`` walks an existing one
and takes group and other bits off everything in it (never following a link), saying how many it fixed;
``open_private`` creates a file in it 0600. A copy is never more readable than its source: 0600 is the
most any file here gets.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import IO, Any

DIR_MODE = 0o700
FILE_MODE = 0o600
_OPEN = {"w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC, "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND}


def make_private(directory: str | os.PathLike) -> Path:
    """Create ``directory`` and its missing parents; each one created here is 0700 (umask or not)."""
    path = Path(directory)
    missing = []
    while not path.exists() and path.parent != path:
        missing.append(path)
        path = path.parent
    for item in reversed(missing):
        try:
            os.mkdir(item, DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(item, DIR_MODE)  # the umask can only take bits away; set them exactly
    return Path(directory)


def open_private(path: str | os.PathLike, how: str = "w", *, binary: bool = True) -> IO[Any]:
    """``open(path, how)`` for a file of the data directory: created 0600, never through a symlink."""
    fd = os.open(path, _OPEN[how] | os.O_NOFOLLOW | os.O_CLOEXEC, FILE_MODE)
    if binary:
        return open(fd, how + "b")
    return open(fd, how, encoding="utf-8")


def repair(directory: str | os.PathLike, *, limit: int = 200_000) -> int:
    """Take group and other bits off ``directory`` and everything in it (links are left alone);
    the number of entries whose mode changed."""
    top = os.fspath(directory)
    fixed = _tighten(top)
    for dirpath, dirnames, filenames in os.walk(top):  # os.walk does not descend into links
        for name in dirnames + filenames:
            fixed += _tighten(os.path.join(dirpath, name))
            limit -= 1
        if limit <= 0:
            break
    return fixed


def _tighten(path: str) -> int:
    try:
        info = os.lstat(path)
    except OSError:
        return 0
    if stat.S_ISLNK(info.st_mode) or not stat.S_IMODE(info.st_mode) & 0o077:
        return 0
    try:
        os.chmod(path, stat.S_IMODE(info.st_mode) & 0o700)  # lstat said: not a link
    except OSError:
        return 0
    return 1


def secure(directory: str | os.PathLike) -> int:
    """Make sure the data dir exists and is private; an existing one that is not (made before this
    version, or under another umask) is repaired once, with one line saying so. Entries fixed."""
    try:
        path = make_private(directory)
        loose = stat.S_IMODE(path.stat().st_mode) & 0o077
    except OSError:
        return 0  # cannot be created (a read-only home): the first write there says so, naming the file
    if not loose:
        return 0  # already private: its contents are created private (a full walk only once)
    fixed = repair(path)
    logging.getLogger(__name__).warning(
        "data dir %s: made %d entr%s private (0700 directories, 0600 files); it holds keys and conversations",
        path,
        fixed,
        "y" if fixed == 1 else "ies",
    )
    return fixed


def problem(directory: str | os.PathLike) -> str | None:
    """What is wrong with the data dir's privacy (for doctor), or None."""
    try:
        mode = stat.S_IMODE(os.stat(directory).st_mode)
    except OSError:
        return None
    if mode & 0o077:
        return f"{os.fspath(directory)} is mode {mode:o}: others can read it (openheim repairs it on its next start)"
    return None
