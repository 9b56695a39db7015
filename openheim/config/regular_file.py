"""Reading a settings file safely: only a regular file (a FIFO or device never blocks or floods a start),
and at most a cap of bytes."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from openheim.errors import ConfigError


def read_regular(path: Path, limit: int, what: str = "", fix: str = "point it at a file") -> bytes:
    """Up to ``limit + 1`` bytes of ``path``; FileNotFoundError when it is missing, a ConfigError when it
    is not a regular file (``fix`` says what to do) or cannot be read (``what`` names it, default the path)."""
    name = what or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO opens at once instead of waiting
    except FileNotFoundError:
        raise
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {name}: {getattr(e, 'strerror', None) or e}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ConfigError(f"{name} is not a regular file (a device, FIFO or directory); {fix}")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks)
    except OSError as e:
        raise ConfigError(f"cannot read {name}: {e.strerror or e}") from None
    finally:
        os.close(fd)
