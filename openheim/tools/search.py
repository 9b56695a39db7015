"""search: regex search over the files under a directory, ripgrep-style (ignore files, hidden, binary)."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.core.permission import hides
from openheim.core.tool_args import optional_bool, optional_str, require_str
from openheim.core.tools import BaseTool, ToolView, ViewContext, short
from openheim.errors import ToolExecutionError
from openheim.tools import forked, search_rg
from openheim.tools.sandbox import canonical_root, validate_path
from openheim.tools.search_files import MAX_FILES, MAX_MATCHES, Match, SearchFiles, collect_files
from openheim.tools.specs import SEARCH

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken, TurnContext

TIMEOUT = 30.0
_NO_PREFILTER = ("(?=", "(?!", "(?<=", "(?<!", "\\A", "\\Z", "(?>", "*+", "++", "?+", "}+")


def compile_pattern(pattern: str, case_insensitive: bool) -> re.Pattern:
    flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(pattern, flags)
    except (re.error, OverflowError, RecursionError) as e:
        raise ToolExecutionError(f"Invalid pattern '{pattern}': {e}") from None


def match_lines(text: str, rx: re.Pattern, prefilter: bool) -> list[tuple[int, str]]:
    """(line number, trimmed line) for every line of ``text`` that ``rx`` matches (pure)."""
    if prefilter and rx.search(text) is None:
        return []
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [(n, line.rstrip()) for n, line in enumerate(lines, 1) if rx.search(line)]


def python_search(files: SearchFiles, rx: re.Pattern, cancel: CancelToken | None) -> list[Match]:
    """Search files in order with Python's re, stopping once MAX_MATCHES lines are found."""
    prefilter = not any(token in rx.pattern for token in _NO_PREFILTER)
    found: list[Match] = []
    for index in range(len(files.paths)):
        if cancel is not None and cancel.cancelled:
            raise ToolExecutionError("search cancelled")
        text = files.text(index)
        if text is None:
            continue
        found.extend((index, n, line) for n, line in match_lines(text, rx, prefilter))
        if len(found) > MAX_MATCHES:
            break
    return found


def format_results(found: list[Match], files: list[str], root: str, capped_files: bool) -> str:
    """The tool output: ``relpath:line: text`` lines, capped, or the no-match message (pure)."""
    if not found:
        if capped_files:
            return f"(no matches found; search stopped after {MAX_FILES} files)"
        return "(no matches found)"
    single = len(files) == 1 and files[0] == root
    lines = []
    for index, number, text in found[:MAX_MATCHES]:
        path = files[index] if single else files[index][len(root.rstrip("/")) + 1 :]
        lines.append(f"{path}:{number}: {text}")
    out = "\n".join(lines)
    if len(found) > MAX_MATCHES:
        out += f"\n... [results truncated at {MAX_MATCHES} matches]"
    elif capped_files:
        out += f"\n... [search stopped after {MAX_FILES} files]"
    return out


def run_search(
    root: str,
    pattern: str,
    case_insensitive: bool,
    cancel: CancelToken | None = None,
    use_rg: bool | None = None,
    hidden: Callable[[str], bool] | None = None,
) -> str:
    """Search ``root`` (a directory or one file); rg is used when available and the pattern allows it.
    Files for which ``hidden(path)`` is true (a read deny rule) are never opened."""
    rx = compile_pattern(pattern, case_insensitive)
    paths, capped = collect_files(root)
    if hidden is not None:
        paths = [p for p in paths if not hidden(p)]
    files = SearchFiles(root, paths)
    try:
        found = None
        if use_rg is not False and search_rg.usable(pattern, required=use_rg is True):
            found = search_rg.rg_search(files, pattern, case_insensitive, cancel)
        if found is None:
            found = python_search(files, rx, cancel)
    finally:
        files.close()
    return format_results(found, paths, root, capped)


def search_killable(
    root: str,
    pattern: str,
    case_insensitive: bool,
    cancel: CancelToken,
    use_rg: bool | None = None,
    timeout: float = TIMEOUT,
    hidden: Callable[[str], bool] | None = None,
) -> str:
    """run_search in a child process that the deadline, a cancel or a signal ends, whatever the pattern.

    Python's re can backtrack for hours on some patterns without letting any other thread run.
    """
    import resource  # noqa: F401  (search_rg's rg child limits)

    # Everything the child runs is imported here first: a module another thread is importing when we fork
    # stays locked in the child for ever (parallel tool calls import lazily), and the search would hang.
    if cancel.cancelled:
        raise ToolExecutionError("search cancelled")
    if not forked.can_fork():
        return run_search(root, pattern, case_insensitive, cancel, use_rg, hidden)
    try:
        return str(
            forked.run_forked(
                lambda: run_search(root, pattern, case_insensitive, None, use_rg, hidden), timeout, cancel
            )
        )
    except forked.Interrupted:
        raise ToolExecutionError("search cancelled") from None
    except forked.Expired:
        raise ToolExecutionError(
            f"search timed out after {timeout:g} seconds and was stopped; search a "
            "smaller path or use a simpler pattern"
        ) from None


class SearchTool(BaseTool):
    """Search file contents with a regular expression."""

    name, description, parameters, capabilities = SEARCH.fields()

    def present(self, args: dict | None, where: ViewContext) -> ToolView:
        args = args or {}
        if not args.get("pattern"):
            return ToolView(self.name, self.capabilities.kind)
        within = f" in {short(args['path'])}" if args.get("path") else ""
        return ToolView(f"Search `{short(args['pattern'])}`{within}", self.capabilities.kind)

    def __init__(self, use_rg: bool | None = None, timeout: float = TIMEOUT) -> None:
        """``use_rg``: None = when available, False = never (tests compare both engines)."""
        self.use_rg = use_rg
        self.timeout = timeout

    def execute(self, args: dict, ctx: TurnContext) -> str:
        pattern = require_str(args, "pattern")
        requested = optional_str(args, "path") or "."
        case_insensitive = optional_bool(args, "case_insensitive")
        root = validate_path(requested, ctx.work_dir, ctx.effective_cwd)
        if not root.exists():
            raise ToolExecutionError(f"path '{requested}' does not exist")
        return search_killable(
            os.fspath(root), pattern, case_insensitive, ctx.cancel, self.use_rg, self.timeout, read_denied_paths(ctx)
        )


def read_denied_paths(ctx: TurnContext) -> Callable[[str], bool] | None:
    """Whether a deny rule forbids reading a file (an absolute path under the sandbox root), from the
    turn's gate; None when no gate hides anything."""
    gate = ctx.gate
    if gate is None:
        return None
    base = canonical_root(ctx.work_dir)  # the files found are real paths below it (the walk follows no link)

    def hidden(path: str) -> bool:
        relative = os.path.relpath(path, base)
        return not relative.startswith("..") and hides(gate, relative.replace(os.sep, "/"))

    return hidden
