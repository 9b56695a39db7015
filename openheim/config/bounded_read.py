"""The one bounded reader for files openheim reads on a user's or a model's say.

Images (``-i``, ``:image``, pasted paths), skills, system.md, instruction files, settings files and the
checkpoint/undo comparisons read through here: the file is opened non-blocking (a FIFO opens at once
instead of waiting for a writer) and, where asked, without following a symlink; it must be a regular
file (fstat, so /dev/zero, a FIFO or a directory is refused before a byte is read); a type check sees
the first bytes before the rest is read; and never more than the cap + 1 bytes are read, whatever the
file claims its size is.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable

_CHUNK = 1 << 20


class NotRegularFile(OSError):
    """A FIFO, device, socket or directory where a file was expected."""


class TooBig(OSError):
    """More bytes than the cap allows; ``size`` is what the file holds as far as it was read (or claims)."""

    def __init__(self, size: int, cap: int, filename: str) -> None:
        super().__init__(errno.EFBIG, f"it is larger than the {cap}-byte limit", filename)
        self.size = size
        self.cap = cap


def open_regular(path: str | os.PathLike, *, follow: bool = True) -> int:
    """A descriptor of the regular file at ``path`` (``follow=False``: a symlink there is refused)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
    except BaseException:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), os.fspath(path))
        raise NotRegularFile(errno.EINVAL, "not a regular file (a FIFO, device or socket)", os.fspath(path))
    return fd


def read_at_most(fd: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``fd``, read in chunks (nothing bigger is ever allocated)."""
    chunks, size = [], 0
    while size < limit:
        try:
            chunk = os.read(fd, min(_CHUNK, limit - size))
        except BlockingIOError:  # a regular file never blocks; be safe anyway
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def read_bounded(
    path: str | os.PathLike,
    cap: int,
    *,
    follow: bool = True,
    header: Callable[[bytes], None] | None = None,
    header_size: int = 16,
) -> bytes:
    """The bytes of the regular file at ``path``, at most ``cap`` of them.

    ``header`` sees the first ``header_size`` bytes before anything more is read, and raises to refuse
    the file (a type check); TooBig when the file holds more than ``cap`` bytes.
    """
    fd = open_regular(path, follow=follow)
    try:
        head = read_at_most(fd, min(header_size, cap + 1)) if header is not None else b""
        if header is not None:
            header(head)
        data = head + read_at_most(fd, cap + 1 - len(head))
        if len(data) > cap:
            raise TooBig(max(os.fstat(fd).st_size, len(data)), cap, os.fspath(path))
        return data
    finally:
        os.close(fd)


def read_text_bounded(path: str | os.PathLike, cap: int, *, follow: bool = True) -> str:
    """The UTF-8 text of ``path`` (undecodable bytes replaced), at most ``cap`` bytes; see read_bounded."""
    return read_bounded(path, cap, follow=follow).decode("utf-8", "replace")


def read_head(path: str | os.PathLike, size: int, *, follow: bool = True) -> bytes:
    """The first ``size`` bytes of a regular file (a type sniff)."""
    fd = open_regular(path, follow=follow)
    try:
        return read_at_most(fd, size)
    finally:
        os.close(fd)
