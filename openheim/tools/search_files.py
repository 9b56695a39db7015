"""Which files a search reads: the walk under its root (hidden files, ignore files and symlinks skipped) and
each file opened without following a symlink, read as text when it is text. Both engines (``search``'s Python
one and ``search_rg``) search these files."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

from openheim.errors import ToolExecutionError
from openheim.tools.ignore import RuleSet, is_ignored
from openheim.tools.sandbox import Beneath, is_private, open_dir, open_file

MAX_MATCHES = 200

MAX_FILES = 50000

MAX_FILE_BYTES = 64 * 1024 * 1024

IGNORE_FILES = (".gitignore", ".ignore")  # later files take precedence at the same level

Match = tuple[int, int, str]  # (file index, line number, text)


def _read_rules(directory: str, dir_fd: int | None = None) -> list[RuleSet]:
    """The ignore files of ``directory`` (read through ``dir_fd`` when given, not following links)."""
    found = []
    for name in IGNORE_FILES:
        data = _read_bytes(os.path.join(directory, name)) if dir_fd is None else _read_at(dir_fd, name)
        if data is not None:
            found.append(RuleSet(directory, data.decode("utf-8", "replace")))
    return found


def _repo_levels(root: str) -> tuple[bool, list[RuleSet]]:
    """(inside a git repo?, the ignore rules of the directories from the repo top down to root's parent)."""
    chain: list[str] = []
    cur = os.path.dirname(root) if os.path.isfile(root) else root
    while True:
        if os.path.exists(os.path.join(cur, ".git")):
            levels = [rs for d in reversed(chain) for rs in _read_rules(d)]
            return True, levels
        parent = os.path.dirname(cur)
        if parent == cur:
            return False, []
        cur = parent
        chain.append(cur)


def _scan_dir(fd: int) -> list[os.DirEntry]:
    try:
        with os.scandir(fd) as it:
            return sorted(it, key=lambda e: e.name)  # code point order = UTF-8 byte order
    except OSError:
        return []


def _open_subdir(dir_fd: int, name: str) -> int | None:
    """The subdirectory, or None if it cannot be opened or is no longer a directory (never a symlink)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def iter_files(root: str) -> Iterator[str]:
    """Regular files under ``root`` in sorted depth-first order, skipping hidden, ignored and symlinks. Each
    directory is opened below the one before without following links: one swapped for a link is skipped."""
    in_repo, base_levels = _repo_levels(root)
    try:
        root_fd = open_dir(root, listing=True)
    except (OSError, ToolExecutionError):
        return
    stack: list[tuple[Iterator[os.DirEntry], list[RuleSet], bool, str, int]] = []

    def enter(fd: int, path: str, levels: list[RuleSet], repo: bool) -> None:
        entries = _scan_dir(fd)
        if any(e.name == ".git" for e in entries):
            levels, repo = [], True
        if repo:
            levels = levels + _read_rules(path, fd)
        stack.append((iter(entries), levels, repo, path, fd))

    try:
        enter(root_fd, root, base_levels, in_repo)
        while stack:
            entries, levels, repo, directory, fd = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            path, is_dir = _visible(entry, directory, levels, root)
            if path is None:
                continue
            if is_dir:
                sub = _open_subdir(fd, entry.name)
                if sub is not None:
                    enter(sub, path, levels, repo)
            else:
                yield path
    finally:
        for *_, fd in stack:
            os.close(fd)


def _visible(entry: os.DirEntry, directory: str, levels: list[RuleSet], root: str) -> tuple[str | None, bool]:
    """The entry's path and whether it is a directory to enter; None for what the walk skips: hidden names,
    links, ignored paths, openheim's data dir (never searched from a root above it), anything not a regular file."""
    if entry.name.startswith(".") or entry.is_symlink():
        return None, False
    is_dir = entry.is_dir(follow_symlinks=False)
    path = os.path.join(directory, entry.name)
    if levels and is_ignored(levels, path, is_dir):
        return None, False
    if is_dir:
        return (None if is_private(path, root) else path), True
    return (path if entry.is_file(follow_symlinks=False) else None), False


def collect_files(root: str, limit: int | None = None) -> tuple[list[str], bool]:
    """Up to ``limit`` (default MAX_FILES) files to search and whether more were left unscanned."""
    limit = MAX_FILES if limit is None else limit
    if os.path.isfile(root):
        return [root], False
    files: list[str] = []
    for path in iter_files(root):
        if len(files) == limit:
            return files, True
        files.append(path)
    return files, False


class SearchFiles:
    """The files of one search, opened without following a symlink anywhere below the root."""

    def __init__(self, root: str, paths: list[str]) -> None:
        self.root, self.paths = root, paths
        self.single = len(paths) == 1 and paths[0] == root
        self._tree: Beneath | None = None
        self._cut = len(root.rstrip("/")) + 1

    def open(self, index: int) -> int | None:
        """A read descriptor of file ``index``, or None if it cannot be opened or is not a regular file of
        at most MAX_FILE_BYTES (neither engine ever scans a huge or sparse file)."""
        try:
            if self.single:
                fd = open_file(self.root, os.O_RDONLY | os.O_NONBLOCK)
            else:
                if self._tree is None:
                    self._tree = Beneath(self.root)
                fd = self._tree.open(self.paths[index][self._cut :], os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, ValueError, ToolExecutionError):
            return None
        try:
            info = os.fstat(fd)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            os.close(fd)
            return None
        return fd

    def text(self, index: int, fd: int | None = None) -> str | None:
        """File ``index`` as text (None when unreadable as text), read through ``fd`` when the caller has it open."""
        if fd is not None:
            return decode_text(_read_fd(fd, rewind=True))
        fd = self.open(index)
        if fd is None:
            return None
        try:
            return decode_text(_read_fd(fd))
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._tree is not None:
            self._tree.close()


def _read_bytes(path: str) -> bytes | None:
    """The file's bytes; None if unreadable, too big or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_at(dir_fd: int, name: str) -> bytes | None:
    """Like _read_bytes for ``name`` in ``dir_fd``, refusing a symlink."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_fd(fd: int, rewind: bool = False) -> bytes | None:
    """The bytes of an open file with as few system calls as possible; None if unreadable or too big."""
    try:
        info = os.fstat(fd)
        size = info.st_size
        if size > MAX_FILE_BYTES or not stat.S_ISREG(info.st_mode):
            return None
        if rewind:
            os.lseek(fd, 0, os.SEEK_SET)
        chunks = [os.read(fd, size + 1)]
        total = len(chunks[0])
        while total > size:  # the file grew, or its size is not reported (e.g. procfs)
            more = os.read(fd, 1 << 20)
            if not more:
                break
            chunks.append(more)
            total += len(more)
            if total > MAX_FILE_BYTES:
                return None
        return b"".join(chunks) if len(chunks) > 1 else chunks[0]
    except OSError:
        return None


def decode_text(data: bytes | None) -> str | None:
    """The bytes as text, or None when they are binary (have NUL), not UTF-8 or missing."""
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
