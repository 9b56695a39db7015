"""Themes: an accent colour per theme name and the colour of every line role (pure, no curses).

Colours are terminal colour numbers (0-7 the ANSI colours, 8-15 their bright forms); ``-1`` is the
terminal's own colour, so the user's background shows through.
"""

from __future__ import annotations

from typing import NamedTuple

DEFAULT_THEME = "gray"
# name -> (colour on terminals with 16+ colours, colour and "bold" on 8-colour terminals)
THEMES: dict[str, tuple[int, tuple[int, bool]]] = {
    "white": (15, (7, True)),
    "gray": (7, (7, False)),
    "blue": (4, (4, False)),
    "cyan": (6, (6, False)),
    "magenta": (13, (5, True)),
    "green": (2, (2, False)),
    "yellow": (3, (3, False)),
    "red": (1, (1, False)),
    "pink": (9, (1, True)),
}
RED, GREEN, YELLOW = 1, 2, 3


class Style(NamedTuple):
    """How a role looks: a foreground colour (-1: the terminal's) and attributes by name."""

    fg: int = -1
    bold: bool = False
    dim: bool = False
    reverse: bool = False
    italic: bool = False
    underline: bool = False


# a reply's Markdown: the same look with and without colours (attributes only)
MARKDOWN = {
    "md_bold": Style(bold=True),
    "md_italic": Style(italic=True),
    "md_bold_italic": Style(bold=True, italic=True),
    "md_heading": Style(bold=True, underline=True),
    "md_link": Style(underline=True),
    "md_dim": Style(dim=True),
    "md_quote": Style(dim=True),
    "md_code": Style(bold=True),
}


def theme_name(name: str | None) -> str:
    """The theme to use for a configured name: unset means the default, unknown means white."""
    if not name:
        return DEFAULT_THEME
    return name if name in THEMES else "white"


def accent(theme: str, colours: int) -> Style:
    bright, (basic, bold) = THEMES[theme_name(theme)]
    if colours >= 16:
        return Style(bright)
    return Style(basic, bold=bold)


def style(role: str, theme: str, colours: int) -> Style:
    """The style of a line role under ``theme`` on a terminal with ``colours`` colours (0: no colour)."""
    if colours < 8:
        return MARKDOWN.get(role) or _mono(role)
    if role == "md_code":
        return Style(6)  # cyan
    if role in MARKDOWN:
        return MARKDOWN[role]
    a = accent(theme, colours)
    table = {
        "user": a,
        "info": a,
        "rule": a,
        "accent": a,
        "prompt": a,
        "thinking": Style(dim=True),
        "result": Style(dim=True),
        "dim": Style(dim=True),
        "tool": Style(YELLOW),
        "tool_ok": Style(GREEN),
        "tool_error": Style(RED),
        "result_error": Style(RED, dim=True),
        "error": Style(RED),
        "selected": Style(reverse=True),
        "title": a._replace(bold=True),
        "allow": Style(GREEN),
        "reject": Style(RED),
    }
    return table.get(role, Style())


def _mono(role: str) -> Style:
    """NO_COLOR or a terminal without colours: attributes only."""
    if role in ("user", "info", "rule", "accent", "prompt", "title", "error", "tool_error"):
        return Style(bold=True)
    if role in ("thinking", "result", "result_error", "dim"):
        return Style(dim=True)
    if role == "selected":
        return Style(reverse=True)
    return Style()
