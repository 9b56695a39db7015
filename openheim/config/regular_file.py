"""Reading a settings file safely: only a regular file (a FIFO or device never blocks or floods a start),
and at most a cap of bytes."""

from __future__ import annotations

import os
from pathlib import Path

from openheim.config.bounded_read import NotRegularFile, open_regular, read_at_most
from openheim.errors import ConfigError


def read_regular(path: Path, limit: int, what: str = "", fix: str = "point it at a file") -> bytes:
    """Up to ``limit + 1`` bytes of ``path``; FileNotFoundError when it is missing, a ConfigError when it
    is not a regular file (``fix`` says what to do) or cannot be read (``what`` names it, default the path)."""
    name = what or str(path)
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        raise
    except (NotRegularFile, IsADirectoryError):
        raise ConfigError(f"{name} is not a regular file (a device, FIFO or directory); {fix}") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"cannot read {name}: {getattr(e, 'strerror', None) or e}") from None
    try:
        return read_at_most(fd, limit + 1)
    except OSError as e:
        raise ConfigError(f"cannot read {name}: {e.strerror or e}") from None
    finally:
        os.close(fd)
