"""Terminal text maths: cell widths, clipping and word wrapping (pure functions, no curses)."""

from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

_TOKENS = re.compile(r"\S+|\s+")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ZERO_WIDTH = {0x200B, 0x200C, 0x200D, 0x2060, 0xFEFF}


@lru_cache(maxsize=4096)
def char_width(ch: str) -> int:
    """Cells one character takes: 2 for wide (CJK, most emoji), 0 for combining marks and joiners."""
    code = ord(ch)
    if code < 0x7F:
        return 1 if code >= 0x20 else 0
    if code in _ZERO_WIDTH or 0xFE00 <= code <= 0xFE0F or unicodedata.combining(ch):
        return 0
    if unicodedata.category(ch) in ("Mn", "Me", "Cf", "Cc"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in "WF" else 1


def width(text: str) -> int:
    """Cells ``text`` takes on one line."""
    if text.isascii() and text.isprintable():
        return len(text)
    return sum(char_width(c) for c in text)


def clean(text: str, tab: str = "    ") -> str:
    """Text safe to draw: surrogates replaced, tabs expanded, other control characters (but newlines) dropped."""
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    text = text.replace("\r\n", "\n").replace("\t", tab)
    return _CONTROL.sub("", text)


def clip(text: str, cells: int) -> str:
    """The longest prefix of ``text`` that fits in ``cells`` (a wide character never straddles the edge)."""
    if cells <= 0:
        return ""
    if text.isascii():
        return text[:cells]
    used = 0
    for i, c in enumerate(text):
        w = char_width(c)
        if used + w > cells:
            return text[:i]
        used += w
    return text


def clip_left(text: str, cells: int) -> str:
    """The longest suffix of ``text`` that fits in ``cells``."""
    if cells <= 0:
        return ""
    used = 0
    for i in range(len(text) - 1, -1, -1):
        w = char_width(text[i])
        if used + w > cells:
            return text[i + 1 :]
        used += w
    return text


def ellipsize(text: str, cells: int) -> str:
    """``text`` cut to ``cells`` with a trailing "…" when something was left out."""
    if width(text) <= cells:
        return text
    return clip(text, cells - 1) + "…" if cells >= 1 else ""


def flatten(text: str, limit: int) -> str:
    """One line of at most ``limit`` characters: whitespace runs become one space."""
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _hard_split(token: str, cells: int) -> list[str]:
    parts: list[str] = []
    while token:
        piece = clip(token, cells) or token[0]  # a wide char in a 1-cell line still moves on
        parts.append(piece)
        token = token[len(piece) :]
    return parts


def wrap_line(line: str, cells: int) -> list[str]:
    """One paragraph word-wrapped to ``cells``; words longer than a line are broken; leading indent kept."""
    cells = max(1, cells)
    if width(line) <= cells:
        return [line.rstrip() if line.strip() else ""]
    out: list[str] = []
    current, used = "", 0
    for token in _TOKENS.findall(line):
        w = width(token)
        if token.isspace():
            if current or not out:  # spaces inside a line, or the paragraph's indent
                current, used = current + token, used + w
            continue
        if used + w <= cells:
            current, used = current + token, used + w
            continue
        if current.strip():
            out.append(current.rstrip())
        current, used = "", 0
        if w > cells:
            pieces = _hard_split(token, cells)
            out.extend(pieces[:-1])
            token, w = pieces[-1], width(pieces[-1])
        current, used = token, w
    if current.strip() or not out:
        out.append(current.rstrip())
    return out


def wrap(text: str, cells: int) -> list[str]:
    """``text`` (newlines kept) word-wrapped to lines of at most ``cells`` cells."""
    lines: list[str] = []
    for paragraph in text.split("\n"):
        lines.extend(wrap_line(paragraph, cells))
    return lines


def wrap_prefixed(text: str, cells: int, first: str, rest: str | None = None) -> list[str]:
    """Wrap under a prefix: ``first`` before the first line, ``rest`` (same width, default spaces) before the others."""
    rest = " " * width(first) if rest is None else rest
    body = wrap(text, max(1, cells - width(first)))
    return [(first if i == 0 else rest) + line for i, line in enumerate(body)]


_COLUMN = re.compile(r"^(\s*\S.*?\s{2,})\S")  # "  :name ARGS    description": the description's column


def hanging_indent(line: str, cells: int) -> int:
    """Where a wrapped line of ``line`` goes on: under its second column (help, pickers) or its own indent."""
    found = _COLUMN.match(line)
    if found is not None and width(found.group(1)) <= cells // 2:
        return width(found.group(1))
    return len(line) - len(line.lstrip(" "))


def wrap_hanging(text: str, cells: int) -> list[str]:
    """``text`` wrapped to ``cells`` with a hanging indent: a line's continuation starts under its second column
    (the description of a ``:command    description`` line) or, without one, under its own indent."""
    cells = max(1, cells)
    out: list[str] = []
    for paragraph in text.split("\n"):
        first = wrap_line(paragraph, cells)[0]
        out.append(first)
        rest = paragraph[len(first) :].strip() if width(paragraph) > cells else ""
        if rest:
            hang = hanging_indent(paragraph, cells)
            out.extend(" " * hang + line for line in wrap_line(rest, max(1, cells - hang)))
    return out
