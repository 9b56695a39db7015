"""What the screen shows for the app's state at a given size: rows of (text, role) segments and the cursor.

No curses here: ``compose`` is a function of the app's state and the size, tested without a terminal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.core import events
from openheim.core.tools import ToolView, parse_arguments
from openheim.tui.overlay import (
    diff_lines,
    footer_text,
    permission_lines,
    usage_text,
    welcome_lines,
)
from openheim.tui.text import flatten
from openheim.tui.transcript import Line

if TYPE_CHECKING:
    from openheim.core.permission import PermissionRequest, Question
    from openheim.tui.app import App
    from openheim.tui.screen import Row

SPINNER = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"
PROMPT = "  › "
MIN_HEIGHT, MIN_WIDTH = 3, 12


def compose(app: App, h: int, w: int) -> tuple[list[Row], tuple[int, int] | None]:
    """Every row at size h×w (chat or overlay, input line, footer) and the cursor (None: hidden)."""
    if h < MIN_HEIGHT or w < MIN_WIDTH:
        return [[("terminal too small", "error")]][: max(1, h)], None
    chat = h - 2
    if app.shown is not None:
        title, details = permission_view(app, app.shown)
        prompt = permission_lines(title, details, app.choice, app.questions.waiting(), min(chat, 6 + len(details)), w)
        body = chat_lines(app, chat - len(prompt), w) + prompt
    elif app.overlay is not None:
        body = app.overlay.lines(chat, w)
    else:
        body = chat_lines(app, chat, w)
    rows: list[Row] = [line.segments() for line in body[:chat]]
    rows += [[("", "assistant")]] * (chat - len(rows))
    text, col = app.input.view(w - len(PROMPT))
    rows.append([(PROMPT, "prompt"), (text, "assistant")])
    rows.append([(footer(app, w), "accent")])
    show_cursor = app.shown is None and app.overlay is None
    return rows, ((h - 2, len(PROMPT) + col) if show_cursor else None)


def chat_lines(app: App, height: int, w: int) -> list[Line]:
    """The welcome screen before the first message, then the transcript's lines the scroll position shows."""
    if height <= 0:
        return []
    if not app.transcript.items:
        cfg = app.session.config
        return welcome_lines(app.version, cfg.model, cfg.provider_name, app.skills, w)[:height]
    lines = app.transcript.lines(w)
    first = app.scroll.first(len(lines), height)
    shown = lines[first : first + height]
    return shown + [Line("", "assistant")] * (height - len(shown))


def footer(app: App, w: int) -> str:
    """Spinner and phase on the left; scroll position, provider · model and context on the right."""
    left = ""
    if app.shown is not None:
        left = " waiting for permission"
    elif app.turn is not None:
        left = f" {SPINNER[app.tick % len(SPINNER)]} {app.phase}…"
    cfg = app.session.config
    right = f"{cfg.provider_name} · {cfg.model}"
    if app.context is not None:
        right += f" · {usage_text(app.context.total)} ctx"
    if not app.scroll.pinned and app.transcript.items:
        pct = app.scroll.percent(len(app.transcript.lines(w)), app.chat_height())
        right = f" {pct}% ↑  " + right
    return footer_text(left, right + " ", w)


def permission_view(app: App, ask: Question) -> tuple[str, list[Line]]:
    """The question's title (the tool's own) and what the call does: its command, a diff, or its arguments."""
    req = ask.request
    view = app.views.get(call_key(req)) or present(app.session.present, req.tool_name, req.arguments)
    title = view.title + (f"  (subagent '{req.subagent}')" if req.subagent else "")
    details: list[Line] = []
    if view.command:
        details.append(Line("    $ " + flatten(view.command, 300), "accent"))
    if view.diff is not None:
        details.extend(diff_lines(view.diff, 8))
    if not details and view.title == req.tool_name and req.arguments.strip():
        details.append(Line("    " + flatten(req.arguments, 300), "dim"))
    return title, details


def present(present_fn: Callable[[str, dict | None], ToolView], name: str, arguments: str) -> ToolView:
    """The tool's own view of a call (its presentation hook); the bare name if the hook fails."""
    import logging

    try:
        return present_fn(name, parse_arguments(arguments))
    except Exception:
        logging.getLogger(__name__).exception("could not present a %s call", name)
        return ToolView(name)


def call_key(req: PermissionRequest) -> str:
    """Which tool call a permission request is about (a subagent's calls are keyed under its name)."""
    if req.subagent is None:
        return req.tool_call_id
    return f"{req.subagent}:{req.parent_tool_call_id}:{req.tool_call_id}"


def tool_line(view: ToolView, name: str, arguments: str) -> str:
    """A tool call in the chat: its title, or its name and an argument preview when the title says no more."""
    if view.title != name or not arguments.strip():
        return view.title
    return f"{name} {flatten(arguments, 120)}"


def compaction_text(event: events.Compaction) -> str:
    """The one line the chat shows for a compaction."""
    if event.error is not None:
        return f"the conversation was not compacted: {event.error}"
    return (
        f"conversation compacted: {event.keep_from} earlier messages summarised "
        f"({len(event.summary)} characters); the full record stays in the session log"
    )
