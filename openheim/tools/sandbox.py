"""Path validation: every file tool resolves its paths here so nothing escapes the session's work_dir.

Order of checks: refuse NUL bytes and over-long paths, normalise lexically (so ``x/../../y`` cannot
escape through a prefix that does not exist yet), then resolve symlinks and require containment in
the canonical work_dir. The openers at the end then open what validate_path returned without
following a symlink anywhere on the way, so a directory swapped for a symlink after the check
cannot lead a tool outside.
"""

from __future__ import annotations

import os
from pathlib import Path

from openheim.config.nofollow import Beneath as Beneath  # re-exported: the file tools open through them
from openheim.config.nofollow import open_dir as open_dir
from openheim.config.nofollow import open_file as open_file
from openheim.config.nofollow import shown
from openheim.errors import InvalidArgument, ToolExecutionError

PATH_MAX = 4096
NAME_MAX = 255


_shown = shown


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


# Opening what validate_path returned without following a symlink on the way lives in
# openheim.config.nofollow (the workspace writer below the tools uses it too).
