"""Opening a path without following a symlink at any component.

A path checked a moment ago may have a directory on it swapped for a symlink since. The openers here
walk the real path from "/" (or from a directory descriptor) one component at a time, each relative to
the previous one's descriptor with O_NOFOLLOW, so a component that is a symlink by then is refused
instead of followed; openat2 with RESOLVE_NO_SYMLINKS does the same in one call where the kernel has it.
The file tools, serve's fs channel and the workspace writer all open through them.
"""

from __future__ import annotations

import errno
import os
import stat

from openheim.config import openat2
from openheim.errors import ToolExecutionError

O_PATH = getattr(os, "O_PATH", 0)
_WALK = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (O_PATH or os.O_RDONLY)


def shown(path: str) -> str:
    """The path as quoted in a message: long ones are shortened."""
    return path if len(path) <= 200 else path[:200] + "…"


def _changed(path: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"path '{shown(path)}' changed while it was being opened (a directory on it is now a symlink); try again"
    )


def _parts(path: str | os.PathLike) -> list[str]:
    text = os.fspath(path)
    if not text.startswith("/"):
        raise ValueError(f"not an absolute path: {text!r}")
    parts = [p for p in text.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"not a normalised path: {text!r}")
    return parts


def step(dir_fd: int, name: str, whole: str, create: bool, flags: int = _WALK, mode: int = 0o777) -> int:
    """Open directory ``name`` under ``dir_fd`` without following a symlink (creating it, with ``mode``, if asked)."""
    try:
        return os.open(name, flags, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    except NotADirectoryError:
        if _is_link(dir_fd, name):
            raise _changed(whole) from None
        raise
    try:
        os.mkdir(name, mode, dir_fd=dir_fd)
    except FileExistsError:
        pass
    return step(dir_fd, name, whole, False, flags)


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def resolved(whole: str, flags: int, mode: int = 0, dir_fd: int | None = None) -> int | None:
    """openat2 with no symlink at any component (beneath ``dir_fd`` when given); None: walk instead."""
    if not openat2.available():
        return None
    if dir_fd is None:
        _parts(whole)  # absolute and normalised, as the walk requires
        resolve, base = openat2.RESOLVE_NO_SYMLINKS, openat2.AT_FDCWD
    else:
        resolve, base = openat2.RESOLVE_NO_SYMLINKS | openat2.RESOLVE_BENEATH, dir_fd
    try:
        return openat2.openat2(whole, flags, mode, dir_fd=base, resolve=resolve)
    except OSError as e:
        if e.errno == errno.ELOOP:  # a component is a symlink now: validate_path resolved every one
            raise _changed(whole) from None
        raise


def open_dir(path: str | os.PathLike, *, create: bool = False, listing: bool = False) -> int:
    """A descriptor of directory ``path`` (absolute, as validate_path returns it), walked from "/".

    ``create`` makes missing directories on the way; ``listing`` opens the last one readable (for
    os.scandir) instead of as a bare path handle. Raises OSError as os.open does, or a
    ToolExecutionError when a component turned into a symlink.
    """
    whole = os.fspath(path)
    if not create:
        flags = (os.O_RDONLY if listing else (O_PATH or os.O_RDONLY)) | os.O_DIRECTORY
        fast = resolved(whole, flags)
        if fast is not None:
            return fast
    fd = os.open("/", _WALK)
    try:
        parts = _parts(whole)
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC) if last and listing else _WALK
            nxt = step(fd, name, whole, create, flags)
            os.close(fd)
            fd = nxt
        if listing and not parts:
            nxt = os.open(".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def open_file(path: str | os.PathLike, flags: int, mode: int = 0o666) -> int:
    """os.open(path, flags) with every directory on the way walked by open_dir and O_NOFOLLOW on the file."""
    fast = resolved(os.fspath(path), flags, mode)
    if fast is not None:
        return fast
    head, name = os.path.split(os.fspath(path))
    parent = open_dir(head)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


def open_subdir(dir_fd: int, rel: str, *, create: bool = False, mode: int = 0o777) -> int:
    """A new descriptor of directory ``rel`` ('/'-separated, normalised, "" for ``dir_fd`` itself) below
    ``dir_fd``, each component opened with O_NOFOLLOW (created with ``mode`` when ``create``)."""
    fd = os.dup(dir_fd)
    try:
        for name in [p for p in rel.split("/") if p]:
            if name in (".", ".."):
                raise ValueError(f"not a normalised relative path: {rel!r}")
            nxt = step(fd, name, rel, create, mode=mode)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


class Beneath:
    """Files below one directory opened by relative path, each step O_NOFOLLOW (for many files at once).

    The descriptor of the directory opened last is kept, so files of one directory cost one open each.
    """

    def __init__(self, root: str | os.PathLike) -> None:
        self.root = os.fspath(root).rstrip("/") or "/"
        self.root_fd = open_dir(self.root)
        self._dir: tuple[str, int] | None = None

    def dir_fd(self, rel_dir: str) -> int:
        """A descriptor of ``rel_dir`` ("" for the root), kept until another directory is asked for."""
        if not rel_dir:
            return self.root_fd
        if self._dir is not None and self._dir[0] == rel_dir:
            return self._dir[1]
        self._drop()
        if any(name in ("", ".", "..") for name in rel_dir.split("/")):
            raise ValueError(f"not a normalised relative path: {rel_dir!r}")
        self._dir = (rel_dir, open_subdir(self.root_fd, rel_dir))
        return self._dir[1]

    def open(self, rel: str, flags: int) -> int:
        """os.open of ``rel`` (relative to the root, '/'-separated) without following any symlink."""
        fast = resolved(rel, flags, dir_fd=self.root_fd)
        if fast is not None:
            return fast
        head, _, name = rel.rpartition("/")
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=self.dir_fd(head))

    def _drop(self) -> None:
        if self._dir is not None:
            os.close(self._dir[1])
            self._dir = None

    def close(self) -> None:
        self._drop()
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1

    def __enter__(self) -> Beneath:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
