"""Tool calls as ACP shows them: human titles, kinds, absolute locations, diffs, and the per-turn tracker."""
from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

if TYPE_CHECKING:
    from openheim.core.client_io import ClientIo
    from openheim.core.turn import CancelToken

log = logging.getLogger(__name__)

DIFF_LIMIT = 1024 * 1024
TITLE_CHARS = 200
_PATH_TOOLS = {"read_file": "Read", "write_file": "Write", "edit_file": "Edit", "list_dir": "List"}


def parse_arguments(arguments: str) -> dict | None:
    """The call's arguments as a dict, or None when they are not a JSON object."""
    if not arguments.strip():
        return {}
    try:
        value = json.loads(arguments)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _short(text: str) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= TITLE_CHARS else flat[: TITLE_CHARS - 1] + "…"


def tool_title(name: str, args: dict | None) -> str:
    """A title naming what the call touches: the command, path, pattern or URL."""
    args = args or {}
    if name in _PATH_TOOLS:
        return f"{_PATH_TOOLS[name]} {_short(args.get('path') or '.')}"
    if name == "execute_command" and args.get("command"):
        return f"Run `{_short(args['command'])}`"
    if name == "search" and args.get("pattern"):
        where = f" in {_short(args['path'])}" if args.get("path") else ""
        return f"Search `{_short(args['pattern'])}`{where}"
    if name == "web_fetch" and args.get("url"):
        return f"Fetch {_short(args['url'])}"
    return name


def absolute(path: str, cwd: Path) -> str:
    p = Path(path).expanduser()
    return str(p if p.is_absolute() else (cwd / p))


def tool_locations(name: str, args: dict | None, cwd: Path) -> list[dict]:
    """Absolute paths (1-based lines) the client can follow."""
    args = args or {}
    path = args.get("path")
    if name == "list_dir" and not path:
        return [{"path": str(cwd)}]
    if not isinstance(path, str) or not path:
        return []
    location: dict[str, Any] = {"path": absolute(path, cwd)}
    offset = args.get("offset")
    if name == "read_file" and isinstance(offset, int) and offset >= 1:
        location["line"] = offset
    return [location]


def _old_text(path: Path, client_io: ClientIo | None, cancel: CancelToken | None) -> str | None:
    """The file as the edit will see it (client buffer first); None for a new or unreadable file."""
    from openheim.core.client_io import reader

    client = reader(client_io)
    try:
        if client is not None:
            return client.read_text_file(path, None, None, cancel)
        if not path.is_file() or path.stat().st_size > DIFF_LIMIT:
            return None
        return path.read_text(encoding="utf-8")
    except Exception as e:  # the diff is a courtesy; the tool reports real failures
        log.debug("no old text for the diff of %s: %s", path, e)
        return None


def diff_content(name: str, args: dict | None, cwd: Path, client_io: ClientIo | None,
                 cancel: CancelToken | None = None) -> dict | None:
    """A ``diff`` tool call content block for write_file / edit_file, when it can be computed."""
    if name not in ("write_file", "edit_file") or not args or not isinstance(args.get("path"), str):
        return None
    path = Path(absolute(args["path"], cwd))
    old = _old_text(path, client_io, cancel)
    if name == "write_file":
        new = args.get("content")
        if not isinstance(new, str):
            return None
    else:
        new = _edited(old, args)
        if new is None:
            return None
    return {"type": "diff", "path": str(path), "oldText": old, "newText": new}


def _edited(old: str | None, args: dict) -> str | None:
    from openheim.tools.edit_file import apply_edit

    if old is None or not isinstance(args.get("old_string"), str) or not isinstance(args.get("new_string"), str):
        return None
    try:
        return apply_edit(old, args["old_string"], args["new_string"], bool(args.get("replace_all")))[0]
    except Exception:
        return None


def text_content(text: str) -> dict:
    return {"type": "content", "content": {"type": "text", "text": text}}


@dataclass
class OpenCall:
    id: str
    name: str
    arguments: str
    args: dict | None
    started: bool = False
    diff: dict | None = None
    terminal_id: str | None = None
    extra: list = field(default_factory=list)


class ToolCallTracker:
    """The tool calls announced in one turn: opened, started, closed; every one closed before the answer."""

    def __init__(self, cwd: Path, kind_of: Callable[[str], str], read_only: Callable[[str], bool],
                 send: Callable[[dict], None], client_io: ClientIo | None = None) -> None:
        self.cwd, self.kind_of, self.read_only, self.send = cwd, kind_of, read_only, send
        self.client_io = client_io
        self.cancel: CancelToken | None = None
        self._open: dict[str, OpenCall] = {}
        self._lock = threading.Lock()

    def opened(self, call_id: str, name: str, arguments: str) -> None:
        args = parse_arguments(arguments)
        call = OpenCall(call_id, name, arguments, args)
        call.diff = diff_content(name, args, self.cwd, self.client_io, self.cancel)
        with self._lock:
            self._open[call_id] = call
        self.send(self.announcement(call))
        if self.read_only(name):
            self.start(call_id)

    def announcement(self, call: OpenCall, status: str = "pending") -> dict:
        update = {"sessionUpdate": "tool_call", "toolCallId": call.id, "title": tool_title(call.name, call.args),
                  "kind": self.kind_of(call.name), "status": status,
                  "locations": tool_locations(call.name, call.args, self.cwd)}
        if call.args is not None:
            update["rawInput"] = call.args
        if call.diff is not None:
            update["content"] = [call.diff]
        return update

    def permission_view(self, call_id: str) -> dict | None:
        """The toolCall object a permission request shows (title, kind, diff or command, rawInput)."""
        with self._lock:
            call = self._open.get(call_id)
        if call is None:
            return None
        view = self.announcement(call)
        view.pop("sessionUpdate")
        if call.name == "execute_command" and call.args and call.args.get("command"):
            view["content"] = [text_content(str(call.args["command"]))]
        return view

    def start(self, call_id: str) -> None:
        with self._lock:
            call = self._open.get(call_id)
            if call is None or call.started:
                return
            call.started = True
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})

    def attach_terminal(self, call_id: str, terminal_id: str) -> None:
        with self._lock:
            call = self._open.get(call_id)
            if call is not None:
                call.terminal_id = terminal_id
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress",
                   "content": [{"type": "terminal", "terminalId": terminal_id}]})

    def closed(self, call_id: str, result: str, is_error: bool) -> None:
        with self._lock:
            call = self._open.pop(call_id, None)
        if call is None:
            return
        if not is_error and not call.started:
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})
        content = []
        if call.terminal_id is not None:
            content.append({"type": "terminal", "terminalId": call.terminal_id})
        elif call.diff is not None and not is_error:
            content.append(call.diff)
        content.append(text_content(result))
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id,
                   "status": "failed" if is_error else "completed", "content": content})

    def close_all(self, reason: str) -> None:
        """Fail every call still open (cancelled or crashed turn)."""
        with self._lock:
            ids = list(self._open)
        for call_id in ids:
            self.closed(call_id, reason, True)
