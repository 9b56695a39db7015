"""list_dir: the entries of one directory, sorted by raw name."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from openheim.core.tool_args import optional_str
from openheim.core.tools import BaseTool, ToolView, ViewContext
from openheim.errors import ToolExecutionError
from openheim.tools.presentation import path_view
from openheim.tools.sandbox import open_dir, validate_path
from openheim.tools.specs import LIST_DIR

if TYPE_CHECKING:
    from openheim.core.turn_context import TurnContext

MAX_ENTRIES = 500


def describe_entry(entry: os.DirEntry, dir_fd: int | None = None) -> str:
    """``name/`` for a directory, ``name -> target`` for a symlink, else the name."""
    if entry.is_symlink():
        try:
            target = os.readlink(entry.path) if dir_fd is None else os.readlink(entry.name, dir_fd=dir_fd)
            return f"{entry.name} -> {target}"
        except OSError:
            return f"{entry.name} -> ?"
    if entry.is_dir(follow_symlinks=False):
        return entry.name + "/"
    return entry.name


def format_listing(lines: list[str]) -> str:
    """Cap and join already-sorted entry lines (pure)."""
    if not lines:
        return "(empty directory)"
    shown = lines[:MAX_ENTRIES]
    if len(lines) > MAX_ENTRIES:
        shown.append(f"... [{len(lines) - MAX_ENTRIES} more entries omitted]")
    return "\n".join(shown)


class ListDirTool(BaseTool):
    """List one directory (not recursive)."""

    name, description, parameters, capabilities = LIST_DIR.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        return path_view("List", self.capabilities.kind, args, where, cwd_if_absent=True)

    def execute(self, args: dict, ctx: TurnContext) -> str:
        requested = optional_str(args, "path") or "."
        path = validate_path(requested, ctx.work_dir, ctx.effective_cwd)
        try:
            fd = open_dir(path, listing=True)
            try:
                with os.scandir(fd) as it:
                    entries = sorted(it, key=lambda e: os.fsencode(e.name))
                return format_listing([describe_entry(e, fd) for e in entries])
            finally:
                os.close(fd)
        except FileNotFoundError:
            raise ToolExecutionError(f"directory '{requested}' does not exist") from None
        except NotADirectoryError:
            raise ToolExecutionError(f"'{requested}' is not a directory; use read_file to read a file") from None
        except OSError as e:
            raise ToolExecutionError(f"cannot list '{requested}': {e.strerror or e}") from None
