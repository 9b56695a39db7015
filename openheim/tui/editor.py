"""The input line: editing keys over a string and a horizontally scrolled view of it (pure, no curses)."""

from __future__ import annotations

from openheim.tui.text import char_width

SHOWN_AS = {"\n": "↵", "\t": " "}


def shown_char(c: str) -> str:
    """How one character of the input is drawn: newline as "↵", tab as a space."""
    return SHOWN_AS.get(c, c)


def _cells(c: str) -> int:
    return char_width(shown_char(c))


class InputLine:
    """Text, a cursor (an index into the text) and the first shown character (horizontal scroll)."""

    def __init__(self) -> None:
        self.text = ""
        self.cursor = 0
        self.scroll = 0

    # --- editing -------------------------------------------------------------------

    def edit(self, key: str) -> bool:
        """Apply an editing key (arrows, Home, Backspace, Delete, Ctrl-U/W/K); False when ``key`` is none."""
        edits = {
            "left": self.left,
            "right": self.right,
            "home": self.home,
            "backspace": self.backspace,
            "delete": self.delete,
            "ctrl-u": self.clear,
            "ctrl-w": self.delete_word,
            "ctrl-k": self.kill_to_end,
        }
        if key not in edits:
            return False
        edits[key]()
        return True

    def insert(self, s: str) -> None:
        self.text = self.text[: self.cursor] + s + self.text[self.cursor :]
        self.cursor += len(s)

    def _cluster_start(self, i: int) -> int:
        """Back from ``i`` over zero-width characters to the character they attach to."""
        while i > 0 and _cells(self.text[i]) == 0 and self.text[i] not in SHOWN_AS:
            i -= 1
        return i

    def _cluster_end(self, i: int) -> int:
        while i < len(self.text) and _cells(self.text[i]) == 0 and self.text[i] not in SHOWN_AS:
            i += 1
        return i

    def left(self) -> None:
        if self.cursor > 0:
            self.cursor = self._cluster_start(self.cursor - 1)

    def right(self) -> None:
        if self.cursor < len(self.text):
            self.cursor = self._cluster_end(self.cursor + 1)

    def home(self) -> None:
        self.cursor = 0

    def end(self) -> None:
        self.cursor = len(self.text)

    def backspace(self) -> None:
        if self.cursor > 0:
            start = self._cluster_start(self.cursor - 1)
            self.text = self.text[:start] + self.text[self.cursor :]
            self.cursor = start

    def delete(self) -> None:
        if self.cursor < len(self.text):
            end = self._cluster_end(self.cursor + 1)
            self.text = self.text[: self.cursor] + self.text[end:]

    def delete_word(self) -> None:
        """Ctrl-W: the word (and the spaces) before the cursor."""
        i = self.cursor
        while i > 0 and self.text[i - 1].isspace():
            i -= 1
        while i > 0 and not self.text[i - 1].isspace():
            i -= 1
        self.text = self.text[:i] + self.text[self.cursor :]
        self.cursor = i

    def kill_to_end(self) -> None:
        self.text = self.text[: self.cursor]

    def clear(self) -> None:
        self.text, self.cursor, self.scroll = "", 0, 0

    def set(self, text: str) -> None:
        """Replace the text (a recalled prompt); the cursor goes to its end."""
        self.text, self.cursor, self.scroll = text, len(text), 0

    def take(self) -> str:
        """The text, leaving the line empty."""
        text = self.text
        self.clear()
        return text

    # --- view ----------------------------------------------------------------------

    def view(self, cells: int) -> tuple[str, int]:
        """(what to draw in ``cells`` cells, the cursor's column); the last column is kept for the cursor."""
        self.scroll = window_start(self.text, self.cursor, self.scroll, cells)
        return visible(self.text, self.scroll, self.cursor, cells)


def window_start(text: str, cursor: int, scroll: int, cells: int) -> int:
    """The first shown character: moved only as far as needed to keep the cursor on screen."""
    room = max(1, cells - 1)  # cells before the cursor; the cursor sits in the next one
    start = min(max(0, scroll), cursor)
    used = sum(_cells(c) for c in text[start:cursor])
    while used > room and start < cursor:
        used -= _cells(text[start])
        start += 1
    return start


def visible(text: str, start: int, cursor: int, cells: int) -> tuple[str, int]:
    """The characters from ``start`` that fit in ``cells - 1`` cells, and the cursor column."""
    room = max(0, cells - 1)
    out, used, col = [], 0, 0
    for i in range(start, len(text)):
        if i == cursor:
            col = used
        w = _cells(text[i])
        if used + w > room:
            break
        out.append(shown_char(text[i]))
        used += w
    else:
        if cursor >= len(text):
            col = used
    return "".join(out), min(col, max(0, cells - 1))
