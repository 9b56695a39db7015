"""write_file: create or overwrite a text file inside the sandbox."""
from __future__ import annotations

import os
import stat
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.core.client_io import writer
from openheim.core.tool_args import require_str, require_text
from openheim.core.tools import (
    BaseTool,
    DiffPreview,
    ToolCapabilities,
    ToolView,
    ViewContext,
)
from openheim.errors import Cancelled, ToolExecutionError
from openheim.tools.presentation import current_text, path_view
from openheim.tools.sandbox import validate_path

if TYPE_CHECKING:
    from openheim.core.turn import TurnContext

CANCELLED = "file write cancelled"


def write_text(path: Path, content: str, ctx: TurnContext) -> None:
    """Write through the client when it can, else to the local disk (creating parent directories)."""
    if ctx.cancel.cancelled:
        raise ToolExecutionError(CANCELLED)
    client = writer(ctx.client_io)
    if client is not None:
        try:
            client.write_text_file(path, content, ctx.cancel)
        except Cancelled:
            raise ToolExecutionError(CANCELLED) from None
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW: the sandbox resolved every link, so a link swapped in since then is refused;
        # O_NONBLOCK: a FIFO without a reader fails at once instead of hanging.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC,
                     0o666)
        with open(fd, "w", encoding="utf-8", newline="") as f:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                raise ToolExecutionError(f"'{path}' is not a regular file")
            f.write(content)
    except IsADirectoryError:
        raise ToolExecutionError(f"'{path}' is a directory; choose a file path") from None
    except OSError as e:
        raise ToolExecutionError(f"cannot write '{path}': {e.strerror or e}") from None


class WriteFileTool(BaseTool):
    """Create or overwrite a file."""

    name = "write_file"
    description = ("Write text to a file, replacing its content. Creates the file and any missing parent "
                   "directories. Use edit_file for small changes to an existing file.")
    parameters = {
        "type": "object",
        "properties": {
            "path": {"type": "string", "description": "File path, relative to the working directory or absolute"},
            "content": {"type": "string", "description": "The complete new content of the file"},
        },
        "required": ["path", "content"],
    }
    capabilities = ToolCapabilities(read_only=False, kind="edit")

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        view = path_view("Write", self.capabilities.kind, args, where)
        content = (args or {}).get("content")
        if not where.with_diff or not view.locations or not isinstance(content, str):
            return view
        path = view.locations[0].path
        return replace(view, diff=DiffPreview(path, current_text(Path(path), where), content))

    def execute(self, args: dict, ctx: TurnContext) -> str:
        requested = require_str(args, "path")
        content = require_text(args, "content")
        path = validate_path(requested, ctx.work_dir, ctx.effective_cwd)
        write_text(path, content, ctx)
        return f"Successfully wrote to {os.fspath(path)}"
