"""Replacing a small file atomically: readers see the old content or the new, never a half-written file."""

from __future__ import annotations

import os
from pathlib import Path


def replace_text(path: Path, text: str, mode: int | None = None) -> None:
    """Write ``text`` to a temporary file beside ``path`` (with ``mode`` if given), then rename it over
    ``path``; the temporary file is removed if anything fails."""
    import tempfile  # only when a file is written: a plain prompt does not pay for it

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
