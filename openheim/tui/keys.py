"""Keys as the app sees them: text, named keys and bracketed pastes (pure, no curses).

The screen turns curses' codes into ``Key`` names; ``KeyDecoder`` recognises a bracketed paste
(``ESC[200~ ... ESC[201~``), which ncurses hands over as loose characters, so pasted newlines are text,
not Enter.
"""

from __future__ import annotations

from typing import NamedTuple

PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"
CONTROL_NAMES = {
    "\r": "enter",
    "\n": "ctrl-j",
    "\x7f": "backspace",
    "\x08": "backspace",
    "\x1b": "esc",
    "\x03": "ctrl-c",
    "\x15": "ctrl-u",
    "\x17": "ctrl-w",
    "\x0b": "ctrl-k",
    "\x01": "home",
    "\x05": "end",
    "\x0c": "ctrl-l",
    "\x04": "delete",
    "\t": "tab",
}


class Key(NamedTuple):
    """``kind`` is "text" (``value`` is the text), "key" (``value`` names it: enter, left, resize, ...) or "paste"."""

    kind: str
    value: str


class KeyDecoder:
    """Feeds raw input (single characters, or names of function keys) and yields Keys."""

    def __init__(self) -> None:
        self._pending = ""  # a possible start of PASTE_START
        self._paste: list[str] | None = None

    def feed(self, raw: str | Key) -> list[Key]:
        if isinstance(raw, Key):
            if self._paste is not None:
                if raw.value == "enter":
                    self._paste.append("\n")
                return []
            return [*self.flush(), raw]
        if self._paste is not None:
            return self._in_paste(raw)
        if self._pending == "\x1b" and raw in ("\r", "\n"):  # Alt+Enter: the terminal sends ESC, Enter
            self._pending = ""
            return [Key("key", "alt-enter")]
        if self._pending or raw == "\x1b":
            self._pending += raw
            if self._pending == PASTE_START:
                self._pending, self._paste = "", []
                return []
            if PASTE_START.startswith(self._pending):
                return []
            return self.flush()
        return [_key_for(raw)]

    def _in_paste(self, ch: str) -> list[Key]:
        assert self._paste is not None
        self._paste.append("\n" if ch == "\r" else ch)
        tail = "".join(self._paste[-len(PASTE_END) :])
        if tail == PASTE_END:
            text = "".join(self._paste[: -len(PASTE_END)])
            self._paste = None
            return [Key("paste", text)]
        return []

    def flush(self) -> list[Key]:
        """What is held back as a possible paste start (call when no more input is waiting)."""
        pending, self._pending = self._pending, ""
        return [_key_for(c) for c in pending]


def _key_for(ch: str) -> Key:
    name = CONTROL_NAMES.get(ch)
    if name is not None:
        return Key("key", name)
    if ch < " " or ch == "\x7f":
        return Key("key", f"ctrl-{chr(ord(ch) + 96)}")
    return Key("text", ch)
