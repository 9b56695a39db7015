"""edit_file: replace an exact, unique piece of text in a file."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from openheim.core.tool_args import optional_bool, require_str, require_text
from openheim.core.tools import (
    BaseTool,
    DiffPreview,
    ToolView,
    ViewContext,
)
from openheim.errors import ToolExecutionError
from openheim.tools.presentation import current_text, path_view
from openheim.tools.read_file import read_whole_text
from openheim.tools.sandbox import validate_path
from openheim.tools.specs import EDIT_FILE
from openheim.tools.write_file import write_text

if TYPE_CHECKING:
    from openheim.core.turn_context import TurnContext


def check_strings(old: str, new: str) -> None:
    """Refuse edits that cannot do anything, before the file is touched."""
    if not old:
        raise ToolExecutionError("old_string must not be empty; use write_file to create a new file")
    if old == new:
        raise ToolExecutionError("old_string and new_string are identical; nothing to edit")


def apply_edit(text: str, old: str, new: str, replace_all: bool) -> tuple[str, int]:
    """The edited text and the number of replacements, or a ToolExecutionError (pure)."""
    check_strings(old, new)
    count = text.count(old)
    if count == 0:
        raise ToolExecutionError("old_string not found in file")
    if count > 1 and not replace_all:
        raise ToolExecutionError(
            f"old_string appears {count} times in the file; provide more surrounding "
            "context to make it unique, or set replace_all to true"
        )
    return text.replace(old, new), count


class EditFileTool(BaseTool):
    """Replace text in an existing file."""

    name, description, parameters, capabilities = EDIT_FILE.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        view = path_view("Edit", self.capabilities.kind, args, where)
        args = args or {}
        old_string, new_string = args.get("old_string"), args.get("new_string")
        if not (where.with_diff and view.locations and isinstance(old_string, str) and isinstance(new_string, str)):
            return view
        path = view.locations[0].path
        old = current_text(Path(path), where)
        if old is None:
            return view
        try:
            new = apply_edit(old, old_string, new_string, bool(args.get("replace_all")))[0]
        except Exception:
            return view
        return replace(view, diff=DiffPreview(path, old, new))

    def execute(self, args: dict, ctx: TurnContext) -> str:
        requested = require_str(args, "path")
        old = require_text(args, "old_string")
        new = require_text(args, "new_string")
        replace_all = optional_bool(args, "replace_all")
        check_strings(old, new)
        path = validate_path(requested, ctx.work_dir, ctx.effective_cwd)
        edited, count = apply_edit(read_whole_text(path, ctx), old, new, replace_all)
        write_text(path, edited, ctx)
        noun = "replacement" if count == 1 else "replacements"
        return f"Successfully edited {path} ({count} {noun})"
