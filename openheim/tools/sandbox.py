"""Path validation: every file tool resolves its paths here so nothing escapes the session's work_dir.

Order of checks: refuse NUL bytes and over-long paths, normalise lexically (so ``x/../../y`` cannot
escape through a prefix that does not exist yet), then resolve symlinks and require containment in
the canonical work_dir. The openers at the end then open what validate_path returned without
following a symlink anywhere on the way, so a directory swapped for a symlink after the check
cannot lead a tool outside.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from openheim.errors import InvalidArgument, ToolExecutionError

PATH_MAX = 4096
NAME_MAX = 255


def _shown(path: str) -> str:
    """The path as quoted in a message: long ones are shortened."""
    return path if len(path) <= 200 else path[:200] + "…"


def normalize(requested: str, base: str) -> str:
    """Join ``requested`` onto absolute ``base`` and drop ``.``/``..`` lexically (pure)."""
    joined = requested if requested.startswith("/") else f"{base}/{requested}"
    parts: list[str] = []
    for comp in joined.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if parts:
                parts.pop()
            continue
        parts.append(comp)
    return "/" + "/".join(parts)


def is_inside(path: str, root: str) -> bool:
    """Component-wise containment: ``/wd2`` is not inside ``/wd``."""
    if root == "/":
        return path.startswith("/")
    return path == root or path.startswith(root + "/")


def check_text(requested: str) -> None:
    """Refuse paths the OS would reject or mangle before touching the disk."""
    if "\0" in requested:
        raise ToolExecutionError("path contains a NUL byte; pass the path without it")
    size = len(os.fsencode(requested))
    if size > PATH_MAX:
        raise ToolExecutionError(f"path is too long ({size} bytes; the limit is {PATH_MAX})")
    for comp in requested.split("/"):
        if len(os.fsencode(comp)) > NAME_MAX:
            raise ToolExecutionError(f"path '{_shown(requested)}' has a component longer than {NAME_MAX} bytes")


def canonical_root(work_dir: str | os.PathLike) -> str:
    """The work dir with symlinks resolved; it must exist and be a directory."""
    try:
        real = os.path.realpath(work_dir, strict=True)
    except (OSError, ValueError):
        raise ToolExecutionError(f"directory '{os.fspath(work_dir)}' is inaccessible") from None
    if not os.path.isdir(real):
        raise ToolExecutionError(f"directory '{os.fspath(work_dir)}' is inaccessible")
    return real


def _base(root: str, cwd: str | os.PathLike | None) -> str:
    """The directory relative paths start from: the cwd when inside the root, else the root."""
    if cwd is None:
        return root
    try:
        real = os.path.realpath(cwd, strict=True)
    except (OSError, ValueError):
        return root
    return real if is_inside(real, root) else root


def _outside(requested: str, root: str) -> ToolExecutionError:
    return ToolExecutionError(f"path '{_shown(requested)}' is outside the work directory '{root}'")


def _dangling(requested: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"path '{_shown(requested)}' is a dangling symlink (its target is missing or loops); "
        "point it at a file inside the work directory or use another path"
    )


def _contain(requested: str, norm: str, root: str) -> str:
    """Resolve a normalised absolute path and require it inside ``root``."""
    if os.path.lexists(norm):
        try:
            real = os.path.realpath(norm, strict=True)
        except OSError:
            raise _dangling(requested) from None
        if not is_inside(real, root):
            raise _outside(requested, root)
        return real
    tail: list[str] = []
    cur = norm
    while not os.path.lexists(cur):
        cur, name = os.path.split(cur)
        tail.append(name)
        if cur == "/" and not os.path.lexists(cur):
            raise ToolExecutionError(f"path '{_shown(requested)}' has no accessible ancestor")
    try:
        real = os.path.realpath(cur, strict=True)
    except OSError:
        if os.path.islink(cur):
            raise _dangling(requested) from None
        raise ToolExecutionError(f"path '{_shown(requested)}' has no accessible ancestor") from None
    if not is_inside(real, root):
        raise _outside(requested, root)
    return os.path.join(real, *reversed(tail))


def validate_path(
    requested: str | os.PathLike, work_dir: str | os.PathLike, cwd: str | os.PathLike | None = None
) -> Path:
    """The real path for ``requested`` (relative to ``cwd``), refused unless inside ``work_dir`` and
    outside every private path (openheim's data dir)."""
    req = os.fspath(requested)
    check_text(req)
    root = canonical_root(work_dir)
    norm = normalize(req, _base(root, cwd))
    real = _contain(req, norm, root)
    _refuse_private(req, real, root)
    return Path(real)


def validate_entry(
    requested: str | os.PathLike, work_dir: str | os.PathLike, cwd: str | os.PathLike | None = None
) -> Path:
    """Like validate_path for delete/rename: the last component is not followed and the root is refused."""
    req = os.fspath(requested)
    check_text(req)
    root = canonical_root(work_dir)
    norm = normalize(req, _base(root, cwd))
    given_root = normalize(os.fspath(work_dir), "/")
    if norm in (root, given_root) or norm == "/":
        if norm == "/" and root != "/":
            raise _outside(req, root)
        raise ToolExecutionError(f"path '{_shown(req)}' is the work directory itself")
    parent, name = os.path.split(norm)
    result = os.path.join(_contain(req, parent, root), name)
    if result == root:
        raise ToolExecutionError(f"path '{_shown(req)}' is the work directory itself")
    if not is_inside(result, root):
        raise _outside(req, root)
    _refuse_private(req, result, root)
    if any(is_inside(private, result) for private in _private):
        raise ToolExecutionError(
            f"path '{_shown(req)}' holds openheim's data directory; it cannot be moved or deleted through a file tool"
        )
    return Path(result)


# --- private paths: openheim's own data, never reachable through a file tool -----------------------
#
# The data dir holds the config (maybe a key) and every project's history. Whatever the sandbox root
# (a session rooted at $HOME contains ~/.openheim), no file tool and no fs client reaches it. The set is
# process-wide: the runtime adds its data dir and config file when it is built.

_private: set[str] = set()


def keep_private(path: str | os.PathLike) -> None:
    """Make ``path`` (and everything below it) unreachable through validate_path and validate_entry."""
    text = os.path.abspath(os.fspath(path))
    _private.add(normalize(text, "/"))
    _private.add(os.path.realpath(text))


def is_private(path: str | os.PathLike, root: str | os.PathLike) -> bool:
    """Whether ``path`` (absolute, canonical) is a private path or lies below one, for a session rooted at
    ``root`` (canonical). A root inside a private path is a choice to work there: nothing below it is hidden."""
    text, top = os.fspath(path), os.fspath(root)
    return any(is_inside(text, private) and not is_inside(top, private) for private in _private)


def _refuse_private(requested: str, real: str, root: str) -> None:
    if is_private(real, root):
        raise ToolExecutionError(
            f"path '{_shown(requested)}' is inside openheim's data directory, which file "
            "tools never reach; choose a path in the project"
        )


def sandbox_root(work_dir: str | os.PathLike | None, cwd: str | os.PathLike) -> Path:
    """A session's sandbox root: the configured work_dir (the cwd must lie inside it), else the cwd."""
    if not os.path.isabs(cwd):
        raise InvalidArgument(f"cwd must be an absolute path, got '{os.fspath(cwd)}'")
    if work_dir is None:
        return Path(cwd)
    root = os.path.realpath(work_dir)
    if not is_inside(os.path.realpath(cwd), root):
        raise InvalidArgument(
            f"cwd '{os.fspath(cwd)}' is outside the configured work_dir "
            f"'{os.fspath(work_dir)}'; start the session inside it or change work_dir"
        )
    return Path(work_dir)


# --- opening what validate_path returned, one component at a time -------------------------------
#
# validate_path checks a path when it is called; a local process may swap a directory on it for a
# symlink a moment later. The openers below walk the real path from "/" one component at a time,
# each relative to the previous one's descriptor with O_NOFOLLOW, so a component that is a symlink
# by then is refused instead of followed. Tools open, create, list and rename through them.

_O_PATH = getattr(os, "O_PATH", 0)
_WALK = os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC | (_O_PATH or os.O_RDONLY)


def _changed(path: str) -> ToolExecutionError:
    return ToolExecutionError(
        f"path '{_shown(path)}' changed while it was being opened (a directory on it is now a symlink); try again"
    )


def _parts(path: str | os.PathLike) -> list[str]:
    text = os.fspath(path)
    if not text.startswith("/"):
        raise ValueError(f"not an absolute path: {text!r}")
    parts = [p for p in text.split("/") if p]
    if any(p in (".", "..") for p in parts):
        raise ValueError(f"not a normalised path: {text!r}")
    return parts


def _step(dir_fd: int, name: str, whole: str, create: bool, flags: int = _WALK) -> int:
    """Open directory ``name`` under ``dir_fd`` without following a symlink (creating it if asked)."""
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
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    except FileExistsError:
        pass
    return _step(dir_fd, name, whole, False, flags)


def _is_link(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def _resolved(whole: str, flags: int, mode: int = 0, dir_fd: int | None = None) -> int | None:
    """openat2 with no symlink at any component (beneath ``dir_fd`` when given); None: walk instead."""
    from openheim.tools import openat2  # ctypes: with the first path a tool opens

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
        flags = (os.O_RDONLY if listing else (_O_PATH or os.O_RDONLY)) | os.O_DIRECTORY
        fast = _resolved(whole, flags)
        if fast is not None:
            return fast
    fd = os.open("/", _WALK)
    try:
        parts = _parts(whole)
        for i, name in enumerate(parts):
            last = i == len(parts) - 1
            flags = (os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC) if last and listing else _WALK
            nxt = _step(fd, name, whole, create, flags)
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
    fast = _resolved(os.fspath(path), flags, mode)
    if fast is not None:
        return fast
    head, name = os.path.split(os.fspath(path))
    parent = open_dir(head)
    try:
        return os.open(name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, mode, dir_fd=parent)
    finally:
        os.close(parent)


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
        fd = os.dup(self.root_fd)
        try:
            for name in rel_dir.split("/"):
                if name in ("", ".", ".."):
                    raise ValueError(f"not a normalised relative path: {rel_dir!r}")
                nxt = _step(fd, name, os.path.join(self.root, rel_dir), False)
                os.close(fd)
                fd = nxt
        except BaseException:
            os.close(fd)
            raise
        self._dir = (rel_dir, fd)
        return fd

    def open(self, rel: str, flags: int) -> int:
        """os.open of ``rel`` (relative to the root, '/'-separated) without following any symlink."""
        fast = _resolved(rel, flags, dir_fd=self.root_fd)
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
