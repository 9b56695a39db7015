"""The curses glue: locale and TERM before start-up, terminal modes, safe drawing, colours and keys.

Only this module imports curses (lazily, from ``terminal()``), and only the UI thread calls it.
"""

from __future__ import annotations

import locale
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from openheim.tui.keys import Key
from openheim.tui.text import clip, width
from openheim.tui.theme import Style, style

FALLBACK_TERM = "xterm-256color"
UTF8_LOCALES = ("C.UTF-8", "C.utf8", "en_US.UTF-8", "en_US.utf8")
PASTE_ON, PASTE_OFF = b"\x1b[?2004h", b"\x1b[?2004l"

Row = list[tuple[str, str]]  # (text, role) segments from the left edge


def use_utf8_locale() -> str:
    """Set the locale from the environment, or a UTF-8 one when that is not UTF-8 (a frozen binary may start
    with an empty locale); returns the codeset in use."""
    try:
        locale.setlocale(locale.LC_ALL, "")
    except locale.Error:
        pass
    if _is_utf8(locale.nl_langinfo(locale.CODESET)):
        return "UTF-8"
    for name in UTF8_LOCALES:
        try:
            locale.setlocale(locale.LC_CTYPE, name)
            return "UTF-8"
        except locale.Error:
            continue
    return locale.nl_langinfo(locale.CODESET)


def _is_utf8(codeset: str) -> bool:
    return codeset.replace("-", "").lower() == "utf8"


def pick_term(term: str | None, known: Callable[[str], bool]) -> str:
    """``term`` when terminfo knows it, else the fallback (``known(name) -> bool``)."""
    if term and term != "dumb" and known(term):
        return term
    return FALLBACK_TERM if known(FALLBACK_TERM) else "xterm"


def _known(curses: Any, fd: int) -> Callable[[str], bool]:
    def check(name: str) -> bool:
        try:
            curses.setupterm(name, fd)
            return True
        except curses.error:
            return False

    return check


@contextmanager
def terminal() -> Iterator[Any]:
    """Curses started in the modes the chat needs; on the way out, whatever happened, the terminal is as it was."""
    import curses
    import termios

    use_utf8_locale()
    fd = sys.stdout.fileno()
    os.environ["TERM"] = pick_term(os.environ.get("TERM"), _known(curses, fd))
    os.environ.setdefault("ESCDELAY", "25")
    saved = _termios(termios, sys.stdin.fileno())
    stdscr = curses.initscr()
    try:
        curses.noecho()
        curses.cbreak()
        _try(curses.nonl)  # Enter arrives as CR and Ctrl-J as LF: Ctrl-J can add a line to the input
        _ctrl_c_as_key(curses, termios, sys.stdin.fileno())
        stdscr.keypad(True)
        _wheel_only(curses)
        _try(curses.set_escdelay, 25)
        _try(curses.putp, PASTE_ON)
        yield stdscr
    finally:
        _try(curses.putp, PASTE_OFF)
        _try(stdscr.keypad, False)
        _try(curses.nocbreak)
        _try(curses.echo)
        _try(curses.endwin)
        if saved is not None:
            _try(termios.tcsetattr, sys.stdin.fileno(), termios.TCSADRAIN, saved)


def _wheel_only(curses: Any) -> None:
    """Mouse reports for the wheel only, so it scrolls the chat while ↑/↓ recall prompts (terminals that turn
    the wheel into arrow keys do so only when no program asks for the mouse). Shift+drag still selects."""
    wheel = getattr(curses, "BUTTON4_PRESSED", 0) | getattr(curses, "BUTTON5_PRESSED", 0)
    if wheel:
        _try(curses.mousemask, wheel)
        _try(curses.mouseinterval, 0)


def _ctrl_c_as_key(curses: Any, termios: Any, fd: int) -> None:
    """Ctrl-C reaches the app as a key, not as SIGINT: the app decides (cancel or quit), and a frozen binary's
    bootloader, which forwards signals to its child, cannot turn one key press into two interrupts."""
    try:
        attrs = termios.tcgetattr(fd)
        attrs[6][termios.VINTR] = b"\x00"  # _POSIX_VDISABLE
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
        curses.def_prog_mode()  # ncurses restores this mode after a suspend or endwin
    except (termios.error, OSError, curses.error):
        pass


def _termios(termios: Any, fd: int) -> list | None:
    try:
        return termios.tcgetattr(fd)
    except (termios.error, OSError):
        return None


def _try(fn: Callable[..., object], *args: object) -> None:
    try:
        fn(*args)
    except Exception:  # some terminals refuse a mode; the chat works without it
        pass


class Screen:
    """Draws rows of coloured segments and reads keys; every write is clipped and never raises."""

    def __init__(self, stdscr: Any, theme: str, color: bool = True) -> None:
        import curses

        self.curses = curses
        self.win = stdscr
        self.theme = theme
        self.colours = self._start_colour() if color else 0
        self._pairs: dict[int, int] = {}
        self._attrs: dict[str, int] = {}
        self.keys = _key_names(curses)
        self.cursor_visible = True
        _try(curses.curs_set, 1)

    def _start_colour(self) -> int:
        c = self.curses
        try:
            if not c.has_colors():
                return 0
            c.start_color()
        except c.error:
            return 0
        try:
            c.use_default_colors()
            self.default_bg = -1
        except c.error:
            self.default_bg = c.COLOR_BLACK
        return min(c.COLORS, 256)

    def set_theme(self, theme: str) -> None:
        self.theme = theme
        self._attrs.clear()

    def attr(self, role: str) -> int:
        """The curses attributes of a line role (colour pairs made on first use)."""
        found = self._attrs.get(role)
        if found is None:
            found = self._attrs[role] = self._make_attr(style(role, self.theme, self.colours))
        return found

    def _make_attr(self, s: Style) -> int:
        c = self.curses
        attr = (c.A_BOLD if s.bold else 0) | (c.A_DIM if s.dim else 0) | (c.A_REVERSE if s.reverse else 0)
        attr |= (getattr(c, "A_ITALIC", 0) if s.italic else 0) | (c.A_UNDERLINE if s.underline else 0)
        if s.fg < 0 or not self.colours or s.fg >= self.colours:
            return attr
        pair = self._pairs.get(s.fg)
        if pair is None:
            pair = len(self._pairs) + 1
            try:
                c.init_pair(pair, s.fg, getattr(self, "default_bg", -1))
            except c.error:
                return attr  # out of pairs, or the colour is refused: attributes only
            self._pairs[s.fg] = pair
        return attr | c.color_pair(pair)

    def size(self) -> tuple[int, int]:
        h, w = self.win.getmaxyx()
        return max(0, h), max(0, w)

    def resized(self) -> None:
        _try(self.curses.update_lines_cols)
        self.win.clearok(True)

    def repaint(self) -> None:
        self.win.clearok(True)

    def draw(self, rows: list[Row], cursor: tuple[int, int] | None) -> None:
        """Erase, draw ``rows`` from the top, place (or hide) the cursor, one refresh."""
        h, w = self.size()
        self.win.erase()
        for y, row in enumerate(rows[:h]):
            x = 0
            for text, role in row:
                if x >= w:
                    break
                x += self.put(y, x, text, role, w, h)
        self._cursor(cursor, h, w)
        self.win.refresh()

    def put(self, y: int, x: int, text: str, role: str, w: int, h: int) -> int:
        """Write ``text`` at (y, x) clipped to the row; returns the cells used."""
        text = clip(text, w - x)
        if not text:
            return 0
        try:
            if y == h - 1 and x + width(text) >= w:
                self.win.insstr(y, x, text, self.attr(role))  # the last cell: addstr would fail to advance
            else:
                self.win.addstr(y, x, text, self.attr(role))
        except self.curses.error:
            pass
        return width(text)

    def _cursor(self, cursor: tuple[int, int] | None, h: int, w: int) -> None:
        show = cursor is not None and 0 <= cursor[0] < h and 0 <= cursor[1] < w
        if show != self.cursor_visible:
            _try(self.curses.curs_set, 1 if show else 0)
            self.cursor_visible = show
        if show and cursor is not None:
            try:
                self.win.move(*cursor)
            except self.curses.error:
                pass

    def read(self, timeout_ms: int) -> str | Key | None:
        """One key: a character, a named Key, or None when nothing came within ``timeout_ms``."""
        self.win.timeout(timeout_ms)
        try:
            raw = self.win.get_wch()
        except self.curses.error:
            return None
        if isinstance(raw, int):
            if raw == getattr(self.curses, "KEY_MOUSE", None):
                return self._mouse()
            return Key("key", self.keys.get(raw, f"code-{raw}"))
        return raw

    def _mouse(self) -> Key:
        """A mouse report as wheel-up / wheel-down (anything else is ignored)."""
        try:
            state = self.curses.getmouse()[4]
        except self.curses.error:
            return Key("key", "mouse")
        if state & getattr(self.curses, "BUTTON4_PRESSED", 0):
            return Key("key", "wheel-up")
        if state & getattr(self.curses, "BUTTON5_PRESSED", 0):
            return Key("key", "wheel-down")
        return Key("key", "mouse")


def _key_names(curses: Any) -> dict[int, str]:
    names = {
        "KEY_LEFT": "left",
        "KEY_RIGHT": "right",
        "KEY_UP": "up",
        "KEY_DOWN": "down",
        "KEY_HOME": "home",
        "KEY_END": "end",
        "KEY_PPAGE": "pgup",
        "KEY_NPAGE": "pgdn",
        "KEY_BACKSPACE": "backspace",
        "KEY_DC": "delete",
        "KEY_ENTER": "enter",
        "KEY_RESIZE": "resize",
        "KEY_SR": "scroll-up",
        "KEY_SF": "scroll-down",  # Shift+↑/↓
    }
    return {getattr(curses, k): v for k, v in names.items() if hasattr(curses, k)}


def environment_has_no_color() -> bool:
    """NO_COLOR set to anything non-empty turns colours off (https://no-color.org)."""
    return bool(os.environ.get("NO_COLOR"))
