"""The chat transcript: items as they stream in, wrapped into coloured lines per width, and scrolling.

Pure: no curses. A ``Line`` is one screen row of text with a role the theme turns into colours.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from openheim.tui.markdown import render_markdown
from openheim.tui.text import clean, flatten, width, wrap, wrap_hanging, wrap_prefixed

USER_BOX = 50  # widest a user message box gets
RESULT_CHARS = 200  # a tool result preview: its first characters, flattened


class Line(NamedTuple):
    text: str
    role: str  # user, assistant, thinking, tool, tool_ok, tool_error, result, result_error, error, info, rule, ...

    def segments(self) -> list[tuple[str, str]]:
        """What the screen draws: the whole text in the line's role."""
        return [(self.text, self.role)]


class StyledLine(Line):
    """A line drawn in styled pieces (a reply's Markdown); compares like a plain Line of its text and role."""

    spans: tuple[tuple[str, str], ...]

    def __new__(cls, text: str, role: str, spans: tuple[tuple[str, str], ...] = ()) -> StyledLine:
        line = super().__new__(cls, text, role)
        line.spans = spans
        return line

    def segments(self) -> list[tuple[str, str]]:
        return list(self.spans) or [(self.text, self.role)]


@dataclass(eq=False)
class Item:
    """One thing in the transcript. ``status`` is a tool call's outcome: running, ok or error."""

    kind: str  # user | assistant | thinking | tool | result | error | info | rule
    text: str
    status: str = ""
    depth: int = 0  # 1 for what a subagent did inside the parent's call
    open: bool = True  # streamed text still arriving
    version: int = 0

    def append(self, text: str) -> None:
        self.text += text
        self.version += 1

    def set_status(self, status: str) -> None:
        self.status = status
        self.version += 1


def render(item: Item, cells: int) -> list[Line]:
    """The screen lines of one item at a terminal width of ``cells``."""
    cells = max(1, cells)
    text = clean(item.text)
    indent = "  " * item.depth
    if item.kind == "user":
        return _user_box(text, cells)
    if item.kind == "assistant":
        return _markdown(text, cells)
    if item.kind == "thinking":
        return [Line(s, "thinking") for s in wrap_prefixed(text.strip("\n"), cells, "  ≫ ")]
    if item.kind == "tool":
        role = {"ok": "tool_ok", "error": "tool_error"}.get(item.status, "tool")
        return [Line(s, role) for s in wrap_prefixed(flatten(text, 400), cells, indent + "⚙ ")]
    if item.kind == "result":
        mark, role = ("✗ ", "result_error") if item.status == "error" else ("→ ", "result")
        preview = flatten(text, RESULT_CHARS) or "(no output)"
        return [Line(s, role) for s in wrap_prefixed(preview, cells, indent + "    " + mark)]
    if item.kind == "error":
        return [Line(s, "error") for s in wrap_prefixed(text, cells, "  error: ", "  ")]
    if item.kind == "rule":
        return [Line(f"─── {text}" if text else "───", "rule")]
    return [Line("  " + s, "info") for s in wrap_hanging(text, cells - 2)]


def _markdown(text: str, cells: int) -> list[Line]:
    """A reply rendered from its Markdown (plain wrapped text if the parser is missing or fails)."""
    try:
        rows = render_markdown(text.strip("\n"), cells)
    except Exception:  # a reply must always show, whatever it holds
        import logging

        logging.getLogger(__name__).debug("markdown rendering failed", exc_info=True)
        return [Line(s, "assistant") for s in wrap_prefixed(text.strip("\n"), cells, "  ")]
    return [StyledLine("".join(t for t, _ in row), "assistant", tuple(row)) for row in rows]


def _user_box(text: str, cells: int) -> list[Line]:
    box = min(USER_BOX, cells)
    if box < 6:
        return [Line(s, "user") for s in wrap_prefixed(text, cells, "› ")]
    body = wrap(text.strip("\n") or " ", box - 4)
    inner = max(width(s) for s in body)
    lines = [Line("╭" + "─" * (inner + 2) + "╮", "user")]
    lines += [Line("│ " + s + " " * (inner - width(s)) + " │", "user") for s in body]
    lines.append(Line("╰" + "─" * (inner + 2) + "╯", "user"))
    return lines


class Transcript:
    """The items of the chat, with per-item line caches so a streamed token re-wraps one item only."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self._cache: dict[int, tuple[int, int, list[Line]]] = {}
        self._lines: list[Line] = []
        self._key: tuple = ()
        self._generation = 0

    def add(self, kind: str, text: str, status: str = "", depth: int = 0) -> Item:
        self.close_stream()
        item = Item(kind, text, status, depth)
        item.open = kind in ("assistant", "thinking")
        self.items.append(item)
        return item

    def insert_after(self, anchor: Item | None, kind: str, text: str, status: str = "", depth: int = 0) -> Item:
        """A new item right after ``anchor`` (at the end when it is None or gone)."""
        if anchor is None or anchor not in self.items:
            return self.add(kind, text, status, depth)
        item = Item(kind, text, status, depth)
        item.open = False
        self.items.insert(self.items.index(anchor) + 1, item)
        return item

    def stream(self, kind: str, text: str) -> Item:
        """Append streamed text to the open item of ``kind``, or start one."""
        last = self.items[-1] if self.items else None
        if last is not None and last.kind == kind and last.open:
            last.append(text)
            return last
        return self.add(kind, text)

    def close_stream(self) -> None:
        if self.items:
            self.items[-1].open = False

    def clear(self) -> None:
        self.items.clear()
        self._cache.clear()
        self._generation += 1

    def __len__(self) -> int:
        return len(self.items)

    def lines(self, cells: int) -> list[Line]:
        """Every line at width ``cells``; a blank line sets each user message apart from what came before."""
        key = (cells, self._generation, len(self.items), sum(i.version for i in self.items))
        if key == self._key:
            return self._lines
        out: list[Line] = []
        for n, item in enumerate(self.items):
            if n and item.kind in ("user", "rule"):
                out.append(Line("", "assistant"))
            out.extend(self._render(item, cells))
        self._key, self._lines = key, out
        return out

    def _render(self, item: Item, cells: int) -> list[Line]:
        cached = self._cache.get(id(item))
        if cached is not None and cached[0] == cells and cached[1] == item.version:
            return cached[2]
        lines = render(item, cells)
        self._cache[id(item)] = (cells, item.version, lines)
        return lines


@dataclass
class Scroll:
    """Which lines show: pinned to the bottom (following the stream) or at a fixed top line."""

    top: int = 0
    pinned: bool = True

    @staticmethod
    def bottom(total: int, height: int) -> int:
        return max(0, total - height)

    def first(self, total: int, height: int) -> int:
        """The index of the first shown line; reaching the bottom pins again."""
        end = self.bottom(total, height)
        if self.pinned or self.top >= end:
            self.pinned, self.top = True, end
        self.top = max(0, min(self.top, end))
        return self.top

    def by(self, delta: int, total: int, height: int) -> None:
        """Move ``delta`` lines (negative: up, which unpins)."""
        start = self.first(total, height)
        self.top = max(0, min(start + delta, self.bottom(total, height)))
        self.pinned = self.top >= self.bottom(total, height)

    def to_bottom(self) -> None:
        self.pinned = True

    def percent(self, total: int, height: int) -> int:
        """How far down the view is, 0-100."""
        end = self.bottom(total, height)
        return 100 if end == 0 else min(100, self.first(total, height) * 100 // end)
