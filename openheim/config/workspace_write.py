"""The one writer for files openheim itself writes into a workspace (and its own config files).

Undo and checkpoint restores, write_file and edit_file, serve's fs channel and every settings edit write
through ``replace_at``: the directory is a descriptor opened without following a symlink on the way (from
"/" for a path the sandbox validated, or below a root that the caller trusts), the new content goes to a
temporary created there with O_CREAT|O_EXCL|O_NOFOLLOW (a link or FIFO planted at any name is never
opened), its mode is set on the descriptor (fchmod), and it is renamed over the target relative to the
same descriptor. A symlink, directory or special file at the target is refused, or with ``over_link``
replaced as an entry (the link itself, never what it points to). Nothing is ever written through a link.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from openheim.config.nofollow import open_dir, open_subdir

_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC


class NotARegularFile(OSError):
    """The target is a FIFO, socket or device: a file write never replaces one silently."""


def write_path(path: str | os.PathLike, data: bytes, *, mode: int | None = None, over_link: bool = False) -> None:
    """Replace the file at absolute, symlink-free ``path`` (what validate_path returns), creating its missing
    parent directories; every directory from "/" on is opened without following a symlink."""
    head, name = os.path.split(os.fspath(path))
    parent = open_dir(head, create=True)
    try:
        replace_at(parent, name, data, mode=mode, over_link=over_link)
    finally:
        os.close(parent)


def write_beneath(
    root: str | os.PathLike, rel: str, data: bytes, *, mode: int | None = None, over_link: bool = False
) -> None:
    """Replace ``root``/``rel`` (``rel`` '/'-separated, normalised): ``root`` is trusted as it is, each
    directory below it is opened (or created) without following a symlink, so nothing lands outside it."""
    head, _, name = rel.strip("/").rpartition("/")
    if not name or name in (".", ".."):
        raise ValueError(f"not a file path below the root: {rel!r}")
    root_fd = os.open(os.fspath(root), _DIR)
    try:
        parent = open_subdir(root_fd, head, create=True)
    finally:
        os.close(root_fd)
    try:
        replace_at(parent, name, data, mode=mode, over_link=over_link)
    finally:
        os.close(parent)


def write_in_dir(path: str | os.PathLike, data: bytes, *, mode: int | None = None) -> None:
    """Replace a file of openheim's own (a config or settings file) in a directory the user chose: the
    directory is taken as it is, the file entry is replaced and never written through."""
    target = Path(path)
    write_beneath(target.parent, target.name, data, mode=mode, over_link=True)


def replace_at(parent: int, name: str, data: bytes, *, mode: int | None = None, over_link: bool = False) -> None:
    """Write ``data`` to a new file beside ``name`` in directory ``parent`` and rename it over ``name``.

    The mode is ``mode``, else the old file's, else the creation default. A hard link to the old file
    elsewhere keeps the old content, as with git and editors. Where the directory refuses a new file, a
    regular file without other links is rewritten in place instead.
    """
    old = existing(parent, name, over_link)
    temp = f".openheim-{os.urandom(8).hex()}.tmp"
    try:
        fd = os.open(temp, _NEW, 0o666, dir_fd=parent)
    except PermissionError:
        if old is None or old.st_nlink > 1 or not stat.S_ISREG(old.st_mode):
            raise
        _rewrite(parent, name, data)
        return
    try:
        with open(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), stat.S_IMODE(mode) & 0o777)
            elif old is not None and stat.S_ISREG(old.st_mode):
                _keep_owner_and_mode(f.fileno(), old)
            f.write(data)
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=parent)
        except OSError:
            pass
        raise


def existing(parent: int, name: str, over_link: bool = False) -> os.stat_result | None:
    """The entry being replaced (None if there is none); refuses what a write must not replace."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), name)
    if over_link:
        return info
    if stat.S_ISLNK(info.st_mode):  # the sandbox resolved every link: this one was swapped in since
        raise OSError(errno.ELOOP, "it is a symbolic link, which is never written through", name)
    if not stat.S_ISREG(info.st_mode):
        raise NotARegularFile(errno.EINVAL, "it is not a regular file (a FIFO, socket or device)", name)
    # The same permission check as opening it for writing (a read-only file stays refused).
    os.close(os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent))
    return info


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            pass
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _rewrite(parent: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotARegularFile(errno.EINVAL, "it is not a regular file (a FIFO, socket or device)", name)
    with open(fd, "wb") as f:
        f.write(data)
