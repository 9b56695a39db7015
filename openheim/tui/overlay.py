"""What covers the chat area for a while: pickers, viewers, the permission prompt, the welcome screen.

Pure: each returns ``Line``s for a given height and width; the app draws them.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from openheim.core.permission import Decision
from openheim.tui.keys import Key
from openheim.tui.text import clean, ellipsize, flatten, width
from openheim.tui.transcript import Line

if TYPE_CHECKING:
    from openheim.core.tools import DiffPreview

PERMISSION_OPTIONS: list[tuple[str, str, Decision]] = [
    ("y", "Allow once", Decision.ALLOW_ONCE),
    ("a", "Allow always", Decision.ALLOW_ALWAYS),
    ("n", "Reject once", Decision.REJECT_ONCE),
    ("r", "Reject always", Decision.REJECT_ALWAYS),
]
ANSWERED = {
    Decision.ALLOW_ONCE: "allowed",
    Decision.ALLOW_ALWAYS: "always allowed",
    Decision.REJECT_ONCE: "rejected",
    Decision.REJECT_ALWAYS: "always rejected",
}


@dataclass
class ListView:
    """A titled list: a picker when ``on_pick`` is set (Enter chooses), else a read-only viewer."""

    title: str
    rows: list[str]
    values: list[Any] = field(default_factory=list)
    on_pick: Callable[[Any], None] | None = None
    empty: str = ""  # shown instead of rows when there are none
    index: int = 0
    top: int = 0

    @property
    def picker(self) -> bool:
        return self.on_pick is not None and bool(self.rows)

    def body_height(self, height: int) -> int:
        return max(1, height - 2) if height >= 3 else max(1, height)

    def move(self, delta: int, height: int) -> None:
        """Move the highlight (picker) or the view (viewer) by ``delta`` rows."""
        rows = self.body_height(height)
        if self.picker:
            self.index = max(0, min(self.index + delta, len(self.rows) - 1))
            if self.index < self.top:
                self.top = self.index
            elif self.index >= self.top + rows:
                self.top = self.index - rows + 1
        else:
            self.top = max(0, min(self.top + delta, max(0, len(self.rows) - rows)))

    def chosen(self) -> Any:
        return self.values[self.index] if self.picker and self.values else None

    def lines(self, height: int, cells: int) -> list[Line]:
        rows = self.body_height(height)
        self.move(0, height)
        body: list[Line] = []
        if not self.rows:
            body = [Line(ellipsize("  " + s, cells), "info") for s in self.empty.split("\n")]
        for i in range(self.top, min(len(self.rows), self.top + rows)):
            text = clean(self.rows[i]).replace("\n", " ")
            if self.picker and i == self.index:
                body.append(Line(ellipsize("› " + text, cells), "selected"))
            else:
                body.append(Line(ellipsize("  " + text, cells), "assistant"))
        if height < 3:
            return body[:height]
        hint = "↑↓ move · Enter choose · Esc back" if self.picker else "↑↓ PgUp/PgDn scroll · Esc back"
        title = Line(ellipsize(f"─── {self.title} ", cells), "title")
        return [title, *body[:rows], Line(ellipsize(hint, cells), "dim")]


def diff_lines(diff: DiffPreview, limit: int) -> list[Line]:
    """The first ``limit`` lines of a unified diff of what a call will change."""
    old = (diff.old_text or "").splitlines()
    new = diff.new_text.splitlines()
    out: list[Line] = []
    for line in difflib.unified_diff(old, new, lineterm="", n=1):
        if line.startswith(("---", "+++")):
            continue
        role = "tool_ok" if line.startswith("+") else "error" if line.startswith("-") else "dim"
        out.append(Line("    " + clean(line), role))
        if len(out) >= limit:
            break
    return out


def permission_lines(
    title: str, details: list[Line], selected: int, waiting: int, height: int, cells: int
) -> list[Line]:
    """The permission prompt in at most ``height`` rows: header, what the call does, the four options."""
    if height < 6:
        keys = " · ".join(f"{k} {label.lower()}" for k, label, _ in PERMISSION_OPTIONS)
        compact = [Line(ellipsize(f"allow {title}?", cells), "title"), Line(ellipsize(keys, cells), "accent")]
        return compact[-height:] if height > 0 else []
    more = f" ({waiting - 1} more waiting)" if waiting > 1 else ""
    head = [
        Line(ellipsize(f"─── permission{more} ", cells), "title"),
        Line(ellipsize("  " + flatten(title, 400), cells), "assistant"),
    ]
    options = []
    for i, (key, label, _) in enumerate(PERMISSION_OPTIONS):
        mark = "›" if i == selected else " "
        options.append(Line(ellipsize(f"  {mark} {label} ({key})", cells), "selected" if i == selected else "accent"))
    room = max(0, height - len(head) - len(options))
    shown = [Line(ellipsize(d.text, cells), d.role) for d in details[:room]]
    return head + shown + options


def welcome_lines(version: str, model: str, provider: str, skills: list[str], cells: int) -> list[Line]:
    """The screen before the first message."""
    about = f"{model}  ·  {provider}" + (f"  ·  skills: {', '.join(skills)}" if skills else "")
    lines = [
        Line(f"openheim  v{version}", "title"),
        Line(about, "assistant"),
        Line("", "assistant"),
        Line("type a message to start", "info"),
        Line("", "assistant"),
    ]
    lines += [Line(f"{cmd:<16}{what}", "dim") for cmd, what in WELCOME_COMMANDS]
    return [Line(ellipsize("  " + line.text if line.text else "", cells), line.role) for line in lines]


WELCOME_COMMANDS = [
    (":help", "commands and keys"),
    (":models", "switch model"),
    (":sessions", "reopen a session"),
    (":q", "quit (or Ctrl-C when idle)"),
]

HELP = """commands:
  :q, :quit          quit
  :help              this help
  :new               new session (same skills and model)
  :sessions          reopen a stored session
  :config            provider, model and limits
  :models [NAME]     pick a model, or switch to NAME
  :mcp               MCP servers and their prompts
  :prompt S/NAME A=V  send MCP server S's prompt NAME (its arguments as name=value)
  :skills            installed skills
  :theme [NAME]      pick a theme, or set NAME (saved in config.toml)
  :memory QUERY      search long-term memory
  :cost              tokens (and dollars, with [prices]) used in this session
  :image PATH        attach an image to your next message (or paste an image file's path)
  :plan              the model's current plan (update_plan)
  :compact           summarise the conversation now (the full record stays in the log)
  :undo [N] [yes]    show (with yes: restore) the files the last N turns changed; force: overwrite edits
  :fork              continue in a copy of this session (the original stays as it is)
keys:
  Enter send · Alt+Enter or Ctrl-J new line · Ctrl-C cancel the reply (quit when idle)
  ←/→ Home/End Backspace/Delete edit · Ctrl-W delete a word · Ctrl-K delete to the end · Ctrl-U clear
  ↑/↓ earlier prompts · PgUp/PgDn, Shift+↑/↓ or the wheel scroll · End (empty line) back to the bottom
permission prompt: y allow once · a allow always · n reject once · r reject always (or ↑↓ Enter)"""


def usage_text(n: int) -> str:
    """A token count for the footer: 950 or 12.3k."""
    return str(n) if n < 1000 else f"{n / 1000:.1f}k"


def footer_text(left: str, right: str, cells: int) -> str:
    """One footer row: ``left`` at the start, ``right`` against the end, the right part cut first."""
    room = cells - width(left) - 1
    if room < 1:
        return ellipsize(left, cells)
    right = ellipsize(right, room) if width(right) > room else right
    return left + " " * (cells - width(left) - width(right)) + right


WHEEL = 3  # lines per wheel notch
MOVES = {
    "up": -1,
    "down": 1,
    "pgup": -5,
    "pgdn": 5,
    "home": -(10**9),
    "end": 10**9,
    "wheel-up": -WHEEL,
    "wheel-down": WHEEL,
}


def overlay_key(overlay: ListView, key: Key, height: int) -> str | None:
    """A key on an open list: moves it, or says "pick" (Enter on a picker) or "close" (Esc, Enter, q)."""
    if key.kind == "key" and key.value in MOVES:
        overlay.move(MOVES[key.value], height)
    elif key.kind == "text" and key.value in "kj" and not overlay.picker:
        overlay.move(-1 if key.value == "k" else 1, height)
    elif key.value == "enter" and overlay.picker:
        return "pick"
    elif key.value in ("esc", "enter") or (key.kind == "text" and key.value == "q"):
        return "close"
    return None
