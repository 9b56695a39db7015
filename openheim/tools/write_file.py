"""write_file: create or overwrite a text file inside the sandbox."""

from __future__ import annotations

import errno
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
    ToolView,
    ViewContext,
)
from openheim.errors import Cancelled, ToolExecutionError
from openheim.tools.presentation import current_text, path_view
from openheim.tools.sandbox import open_dir, validate_path
from openheim.tools.specs import WRITE_FILE

if TYPE_CHECKING:
    from openheim.core.turn_context import TurnContext

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
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise ToolExecutionError(
            "content is not valid Unicode text (it has an unpaired surrogate); send the text without it"
        ) from None
    try:
        parent = open_dir(path.parent, create=True)
        try:
            replace_file(parent, path.name, data, path)
        finally:
            os.close(parent)
    except IsADirectoryError:
        raise ToolExecutionError(f"'{path}' is a directory; choose a file path") from None
    except OSError as e:
        raise ToolExecutionError(f"cannot write '{path}': {e.strerror or e}") from None


def _existing(parent: int, name: str, path: Path) -> os.stat_result | None:
    """The file being replaced (None if there is none); refuses what write_file must not replace."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR))
    if stat.S_ISLNK(info.st_mode):  # the sandbox resolved every link: this one was swapped in since
        raise OSError(errno.ELOOP, os.strerror(errno.ELOOP))
    if not stat.S_ISREG(info.st_mode):
        raise ToolExecutionError(f"'{path}' is not a regular file")
    # The same permission check as opening it for writing (a read-only file stays refused).
    os.close(os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent))
    return info


def replace_file(parent: int, name: str, data: bytes, path: Path) -> None:
    """Write ``data`` to a new file beside ``name`` and rename it over ``name``, keeping its mode.

    A hard link to the old file elsewhere keeps the old content, as with git and editors. Where the
    directory refuses a new file, a file without other links is rewritten in place instead.
    """
    old = _existing(parent, name, path)
    temp = f".openheim-{os.urandom(8).hex()}.tmp"
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666, dir_fd=parent)
    except PermissionError:
        if old is None or old.st_nlink > 1:
            raise
        _rewrite(parent, name, data)
        return
    try:
        with open(fd, "wb") as f:
            if old is not None:
                _keep_owner_and_mode(f.fileno(), old)
            f.write(data)
        os.rename(temp, name, src_dir_fd=parent, dst_dir_fd=parent)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=parent)
        except OSError:
            pass
        raise


def _keep_owner_and_mode(fd: int, old: os.stat_result) -> None:
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except OSError:
            pass
    os.fchmod(fd, stat.S_IMODE(old.st_mode))


def _rewrite(parent: int, name: str, data: bytes) -> None:
    fd = os.open(name, os.O_WRONLY | os.O_TRUNC | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
    with open(fd, "wb") as f:
        f.write(data)


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
