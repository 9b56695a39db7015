"""Shared pieces of the built-in tools' presentation hooks: path titles, locations and old file text."""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

from openheim.core.client_io import reader
from openheim.core.tools import Location, ToolView, ViewContext, short
from openheim.tools.sandbox import open_file, validate_path

log = logging.getLogger(__name__)

DIFF_LIMIT = 1024 * 1024


def path_view(
    verb: str, kind: str, args: dict | None, where: ViewContext, *, cwd_if_absent: bool = False, line: object = None
) -> ToolView:
    """``{verb} {path}``, with the path as a location the client can follow."""
    path = (args or {}).get("path")
    title = f"{verb} {short(path or '.')}"
    if cwd_if_absent and not path:
        return ToolView(title, kind, (Location(str(where.cwd)),))
    if not isinstance(path, str) or not path:
        return ToolView(title, kind)
    at = line if isinstance(line, int) and line >= 1 else None
    return ToolView(title, kind, (Location(where.absolute(path), at),))


def current_text(path: Path, where: ViewContext) -> str | None:
    """The file as a change will see it (the client's buffer first); None for a new or unreadable file.

    Only files inside the session directory are shown, read without following a symlink.
    """
    client = reader(where.client_io)
    try:
        path = validate_path(path, where.root or where.cwd)
        if client is not None:
            return client.read_text_file(path, None, None, where.cancel)
        with open(open_file(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            info = os.fstat(f.fileno())
            if not stat.S_ISREG(info.st_mode) or info.st_size > DIFF_LIMIT:
                return None
            return f.read(DIFF_LIMIT + 1).decode("utf-8")
    except FileNotFoundError:
        return None
    except Exception as e:  # the diff is a courtesy; the tool reports real failures
        log.debug("no old text for the diff of %s: %s", path, e)
        return None
