"""The history's file operations: whole writes, atomic replaces, fsyncs, one-line errors naming the file.

Everything here is in openheim's private data dir: directories are created 0700 and files 0600
(``LOG_MODE``), whatever the umask.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from openheim.config.private_data import FILE_MODE, make_private
from openheim.errors import file_error

LOG_MODE = FILE_MODE


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def truncate_quietly(fd: int, size: int) -> None:
    try:
        os.ftruncate(fd, size)
    except OSError:
        pass


def read_range(fd: int, offset: int, length: int) -> bytes:
    os.lseek(fd, offset, os.SEEK_SET)
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.read(fd, length)
        if not chunk:
            break
        chunks.append(chunk)
        length -= len(chunk)
    return b"".join(chunks)


@contextmanager
def io_errors(action: str, path: Path) -> Iterator[None]:
    """An OSError inside becomes a one-line FileAccessError naming ``path``."""
    try:
        yield
    except OSError as e:
        raise file_error(e, action, path) from None


def make_dir(directory: Path) -> None:
    """Create ``directory`` (and missing parents) 0700: it is part of the private data dir."""
    try:
        make_private(directory)
    except OSError as e:
        raise file_error(e, "create directory", None if e.filename else directory) from None


def atomic_write(path: Path, data: bytes, durable: bool = True) -> None:
    """Write ``data`` to a temp file beside ``path`` and rename it over ``path``; ``durable``: fsync the file
    before the rename and the directory after it."""
    make_dir(path.parent)
    with io_errors("write", path):
        replace_with(path, data, durable)


def replace_with(path: Path, data: bytes, durable: bool) -> None:
    import tempfile

    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    except BaseException:
        os.close(fd)
        os.unlink(tmp)
        raise
    os.close(fd)
    try:
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    if durable:
        fsync_dir(path.parent)


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
