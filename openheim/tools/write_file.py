"""write_file: create or overwrite a text file inside the sandbox."""

from __future__ import annotations

import errno
import os
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.config.workspace_write import write_path
from openheim.core.client_io import writer
from openheim.core.tool_args import require_str, require_text
from openheim.core.tools import (
    BaseTool,
    DiffPreview,
    ToolView,
    ViewContext,
)
from openheim.errors import Cancelled, ToolExecutionError
from openheim.tools.presentation import current_text, path_view
from openheim.tools.sandbox import validate_path
from openheim.tools.specs import WRITE_FILE

if TYPE_CHECKING:
    from openheim.core.turn_context import TurnContext

CANCELLED = "file write cancelled"


def write_refused(path: Path, error: OSError) -> str:
    """One sentence for a write the system refused (a bare "[Errno 22] Invalid argument" says nothing)."""
    why = error.strerror or str(error)
    if error.errno == errno.EINVAL and "regular file" not in why:
        why = "the file system refused the name or the write (invalid argument); choose another name"
    elif error.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        why += " (the sandbox or the file's permissions do not allow writing there)"
    return f"cannot write '{path}': {why}"


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
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolExecutionError(
            "content is not valid Unicode text (it has an unpaired surrogate); send the text without it"
        ) from None
    try:
        write_path(path, data)
    except IsADirectoryError:
        raise ToolExecutionError(f"'{path}' is a directory; choose a file path") from None
    except OSError as e:
        raise ToolExecutionError(write_refused(path, e)) from None


class WriteFileTool(BaseTool):
    """Create or overwrite a file."""

    name, description, parameters, capabilities = WRITE_FILE.fields()

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
