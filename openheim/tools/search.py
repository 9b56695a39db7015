"""search: regex search over the files under a directory, ripgrep-style (ignore files, hidden, binary)."""

from __future__ import annotations

import os
import re
import stat
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from openheim.core.tool_args import optional_bool, optional_str, require_str
from openheim.core.tools import BaseTool, ToolView, ViewContext, short
from openheim.errors import ToolExecutionError
from openheim.tools.sandbox import Beneath, canonical_root, is_private, open_dir, open_file, validate_path
from openheim.tools.specs import SEARCH

if TYPE_CHECKING:
    from openheim.core.turn_context import CancelToken, TurnContext
    from openheim.tools.ignore import RuleSet

MAX_MATCHES = 200
MAX_FILES = 50000
MAX_FILE_BYTES = 64 * 1024 * 1024
TIMEOUT = 30.0
IGNORE_FILES = (".gitignore", ".ignore")  # later files take precedence at the same level
_NO_PREFILTER = ("(?=", "(?!", "(?<=", "(?<!", "\\A", "\\Z", "(?>", "*+", "++", "?+", "}+")

Match = tuple[int, int, str]  # (file index, line number, text)


def _read_rules(directory: str, dir_fd: int | None = None) -> list[RuleSet]:
    """The ignore files of ``directory`` (read through ``dir_fd`` when given, not following links)."""
    # imported here: ignore rules are built on the first search, not at start-up
    from openheim.tools.ignore import RuleSet

    found = []
    for name in IGNORE_FILES:
        data = _read_bytes(os.path.join(directory, name)) if dir_fd is None else _read_at(dir_fd, name)
        if data is not None:
            found.append(RuleSet(directory, data.decode("utf-8", "replace")))
    return found


def _repo_levels(root: str) -> tuple[bool, list[RuleSet]]:
    """(inside a git repo?, the ignore rules of the directories from the repo top down to root's parent)."""
    chain: list[str] = []
    cur = os.path.dirname(root) if os.path.isfile(root) else root
    while True:
        if os.path.exists(os.path.join(cur, ".git")):
            levels = [rs for d in reversed(chain) for rs in _read_rules(d)]
            return True, levels
        parent = os.path.dirname(cur)
        if parent == cur:
            return False, []
        cur = parent
        chain.append(cur)


def _scan_dir(fd: int) -> list[os.DirEntry]:
    try:
        with os.scandir(fd) as it:
            return sorted(it, key=lambda e: e.name)  # code point order = UTF-8 byte order
    except OSError:
        return []


def _open_subdir(dir_fd: int, name: str) -> int | None:
    """The subdirectory, or None if it cannot be opened or is no longer a directory (never a symlink)."""
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError:
        return None


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def iter_files(root: str) -> Iterator[str]:
    """Regular files under ``root`` in sorted depth-first order, skipping hidden, ignored and symlinks.

    Directories are opened one below the other without following symlinks, so one swapped for a
    symlink while the walk runs is skipped, not followed.
    """
    from openheim.tools.ignore import is_ignored

    in_repo, base_levels = _repo_levels(root)
    try:
        root_fd = open_dir(root, listing=True)
    except (OSError, ToolExecutionError):
        return
    stack: list[tuple[Iterator[os.DirEntry], list[RuleSet], bool, str, int]] = []

    def enter(fd: int, path: str, levels: list[RuleSet], repo: bool) -> None:
        entries = _scan_dir(fd)
        if any(e.name == ".git" for e in entries):
            levels, repo = [], True
        if repo:
            levels = levels + _read_rules(path, fd)
        stack.append((iter(entries), levels, repo, path, fd))

    try:
        enter(root_fd, root, base_levels, in_repo)
        while stack:
            entries, levels, repo, directory, fd = stack[-1]
            entry = next(entries, None)
            if entry is None:
                stack.pop()
                os.close(fd)
                continue
            if entry.name.startswith(".") or entry.is_symlink():
                continue
            is_dir = entry.is_dir(follow_symlinks=False)
            path = os.path.join(directory, entry.name)
            if levels and is_ignored(levels, path, is_dir):
                continue
            if is_dir:
                if is_private(path, root):  # openheim's data dir: never searched from a root above it
                    continue
                sub = _open_subdir(fd, entry.name)
                if sub is not None:
                    enter(sub, path, levels, repo)
            elif entry.is_file(follow_symlinks=False):
                yield path
    finally:
        for *_, fd in stack:
            os.close(fd)


def collect_files(root: str, limit: int | None = None) -> tuple[list[str], bool]:
    """Up to ``limit`` (default MAX_FILES) files to search and whether more were left unscanned."""
    limit = MAX_FILES if limit is None else limit
    if os.path.isfile(root):
        return [root], False
    files: list[str] = []
    for path in iter_files(root):
        if len(files) == limit:
            return files, True
        files.append(path)
    return files, False


class SearchFiles:
    """The files of one search, opened without following a symlink anywhere below the root."""

    def __init__(self, root: str, paths: list[str]) -> None:
        self.root, self.paths = root, paths
        self.single = len(paths) == 1 and paths[0] == root
        self._tree: Beneath | None = None
        self._cut = len(root.rstrip("/")) + 1

    def open(self, index: int) -> int | None:
        """A read descriptor of file ``index``, or None if it cannot be opened or is not a regular file of
        at most MAX_FILE_BYTES (neither engine ever scans a huge or sparse file)."""
        try:
            if self.single:
                fd = open_file(self.root, os.O_RDONLY | os.O_NONBLOCK)
            else:
                if self._tree is None:
                    self._tree = Beneath(self.root)
                fd = self._tree.open(self.paths[index][self._cut :], os.O_RDONLY | os.O_NONBLOCK)
        except (OSError, ValueError, ToolExecutionError):
            return None
        try:
            info = os.fstat(fd)
        except OSError:
            info = None
        if info is None or not stat.S_ISREG(info.st_mode) or info.st_size > MAX_FILE_BYTES:
            os.close(fd)
            return None
        return fd

    def text(self, index: int, fd: int | None = None) -> str | None:
        """File ``index`` as text (None when unreadable as text), read through ``fd`` when the caller has it open."""
        if fd is not None:
            return decode_text(_read_fd(fd, rewind=True))
        fd = self.open(index)
        if fd is None:
            return None
        try:
            return decode_text(_read_fd(fd))
        finally:
            os.close(fd)

    def close(self) -> None:
        if self._tree is not None:
            self._tree.close()


def compile_pattern(pattern: str, case_insensitive: bool) -> re.Pattern:
    flags = re.MULTILINE | (re.IGNORECASE if case_insensitive else 0)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return re.compile(pattern, flags)
    except (re.error, OverflowError, RecursionError) as e:
        raise ToolExecutionError(f"Invalid pattern '{pattern}': {e}") from None


def _read_bytes(path: str) -> bytes | None:
    """The file's bytes; None if unreadable, too big or not a regular file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_at(dir_fd: int, name: str) -> bytes | None:
    """Like _read_bytes for ``name`` in ``dir_fd``, refusing a symlink."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)
    except OSError:
        return None
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)


def _read_fd(fd: int, rewind: bool = False) -> bytes | None:
    """The bytes of an open file with as few system calls as possible; None if unreadable or too big."""
    try:
        info = os.fstat(fd)
        size = info.st_size
        if size > MAX_FILE_BYTES or not stat.S_ISREG(info.st_mode):
            return None
        if rewind:
            os.lseek(fd, 0, os.SEEK_SET)
        chunks = [os.read(fd, size + 1)]
        total = len(chunks[0])
        while total > size:  # the file grew, or its size is not reported (e.g. procfs)
            more = os.read(fd, 1 << 20)
            if not more:
                break
            chunks.append(more)
            total += len(more)
            if total > MAX_FILE_BYTES:
                return None
        return b"".join(chunks) if len(chunks) > 1 else chunks[0]
    except OSError:
        return None


def decode_text(data: bytes | None) -> str | None:
    """The bytes as text, or None when they are binary (have NUL), not UTF-8 or missing."""
    if data is None or b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


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
    from openheim.tools import search_rg

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

    from openheim.tools import forked, ignore, search_rg  # noqa: F401

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
    from openheim.core.permission import hides

    gate = ctx.gate
    if gate is None:
        return None
    base = canonical_root(ctx.work_dir)  # the files found are real paths below it (the walk follows no link)

    def hidden(path: str) -> bool:
        relative = os.path.relpath(path, base)
        return not relative.startswith("..") and hides(gate, relative.replace(os.sep, "/"))

    return hidden
