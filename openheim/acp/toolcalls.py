"""Tool calls as ACP shows them: each tool's own view (title, kind, locations, diff) as ACP objects,
and the per-turn tracker that opens, starts and closes every announced call."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from openheim.core.tools import ToolView, parse_arguments

if TYPE_CHECKING:
    from openheim.core.tools import ToolView

log = logging.getLogger(__name__)

Present = Callable[[str, "dict | None"], "ToolView"]
OPEN_WAIT = 2.0  # seconds a permission request waits for its tool call to be announced first


def locations(view: ToolView) -> list[dict]:
    out: list[dict[str, Any]] = []
    for loc in view.locations:
        item: dict[str, Any] = {"path": loc.path}
        if loc.line is not None:
            item["line"] = loc.line
        out.append(item)
    return out


def diff_content(view: ToolView) -> dict | None:
    """A ``diff`` tool call content block, when the tool previewed its change."""
    d = view.diff
    if d is None:
        return None
    return {"type": "diff", "path": d.path, "oldText": d.old_text, "newText": d.new_text}


def tool_call_object(call_id: str, view: ToolView, args: dict | None, status: str, meta: dict | None = None) -> dict:
    """The ToolCall fields every announcement and permission request carries."""
    obj: dict[str, object] = {
        "toolCallId": call_id,
        "title": view.title,
        "kind": view.kind,
        "status": status,
        "locations": locations(view),
    }
    if args is not None:
        obj["rawInput"] = args
    if meta:
        obj["_meta"] = meta
    return obj


def subagent_call_id(subagent: str, parent_tool_call_id: str, call_id: str) -> str:
    """A subagent's tool call as the client sees it: unique beside the parent's own calls."""
    return f"subagent:{subagent}:{parent_tool_call_id}:{call_id}"


def subagent_meta(subagent: str, parent_tool_call_id: str) -> dict:
    return {"openheim/parentToolCallId": parent_tool_call_id, "openheim/subagent": subagent}


def text_content(text: str) -> dict:
    return {"type": "content", "content": {"type": "text", "text": text}}


@dataclass
class OpenCall:
    id: str
    name: str
    args: dict | None
    view: ToolView
    meta: dict | None = None
    started: bool = False
    terminal_id: str | None = None


class ToolCallTracker:
    """The tool calls announced in one turn: opened, started, closed; every one closed before the answer."""

    def __init__(self, send: Callable[[dict], None], present: Present | None = None) -> None:
        self.send = send
        self.present = present
        self._open: dict[str, OpenCall] = {}
        self._announced: set[str] = set()
        self._cond = threading.Condition()

    def opened(
        self,
        call_id: str,
        name: str,
        arguments: str,
        subagent: str | None = None,
        meta: dict | None = None,
        view: ToolView | None = None,
    ) -> None:
        """Announce a call; ``view`` is the tool's own presentation, taken before the call ran."""
        from dataclasses import replace

        args = parse_arguments(arguments)
        if view is None:
            view = self.present(name, args) if self.present is not None else ToolView(name)
        if subagent is not None:
            view = replace(view, title=f"{view.title} (subagent {subagent})")
        call = OpenCall(call_id, name, args, view, meta)
        self.send(self.announcement(call))
        with self._cond:
            self._open[call_id] = call
            self._announced.add(call_id)
            self._cond.notify_all()
        if view.read_only:
            self.start(call_id)

    def announcement(self, call: OpenCall, status: str = "pending") -> dict:
        update = {"sessionUpdate": "tool_call", **tool_call_object(call.id, call.view, call.args, status, call.meta)}
        diff = diff_content(call.view)
        if diff is not None:
            update["content"] = [diff]
        return update

    def permission_view(self, call_id: str) -> dict | None:
        """The toolCall object a permission request shows (title, kind, diff or command, rawInput).

        The call's announcement goes out first: this waits briefly for the turn's events to catch up.
        """
        with self._cond:
            self._cond.wait_for(lambda: call_id in self._announced, OPEN_WAIT)
            call = self._open.get(call_id)
        if call is None:
            return None
        view = self.announcement(call)
        view.pop("sessionUpdate")
        if call.view.command:
            view["content"] = [text_content(call.view.command)]
        return view

    def start(self, call_id: str) -> None:
        with self._cond:
            call = self._open.get(call_id)
            if call is None or call.started:
                return
            call.started = True
        self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})

    def attach_terminal(self, call_id: str, terminal_id: str) -> None:
        with self._cond:
            call = self._open.get(call_id)
            if call is not None:
                call.terminal_id = terminal_id
        self.send(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "in_progress",
                "content": [{"type": "terminal", "terminalId": terminal_id}],
            }
        )

    def closed(self, call_id: str, result: str, is_error: bool) -> None:
        with self._cond:
            call = self._open.pop(call_id, None)
        if call is None:
            return
        if not is_error and not call.started:
            self.send({"sessionUpdate": "tool_call_update", "toolCallId": call_id, "status": "in_progress"})
        content: list[dict] = []
        if call.terminal_id is not None:
            content.append({"type": "terminal", "terminalId": call.terminal_id})
        elif (diff := diff_content(call.view)) is not None and not is_error:
            content.append(diff)
        content.append(text_content(result))
        self.send(
            {
                "sessionUpdate": "tool_call_update",
                "toolCallId": call_id,
                "status": "failed" if is_error else "completed",
                "content": content,
            }
        )

    def close_all(self, reason: str) -> None:
        """Fail every call still open (cancelled or crashed turn)."""
        with self._cond:
            ids = list(self._open)
        for call_id in ids:
            self.closed(call_id, reason, True)
