"""Text from a model, a tool, a file name or a server, made safe to print on a terminal.

``visible`` is THE filter for every such text a command prints: each control character (C0 but tab and
newline, CR included, DEL, all of C1) is shown as an escape (``\\x1b``, ``\\r``) instead of reaching the
terminal, so no OSC 52 clipboard write, title change, line overwrite, screen clear or DCS gets through,
and the reader sees that the name held one. ``strip_controls`` and ``one_line`` drop them instead (the
chat and run's output, where the text is prose).
"""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all C0 but tab and newline, DEL, all C1
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_NAMED = {"\r": "\\r", "\x1b": "\\x1b", "\x07": "\\a", "\b": "\\b", "\x0c": "\\f", "\x0b": "\\v"}


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _NAMED.get(char) or f"\\x{ord(char):02x}"


def _no_surrogates(text: str) -> str:
    if any("\ud800" <= c <= "\udfff" for c in text):
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return text


def visible(text: object, *, one_line: bool = False) -> str:
    """``text`` (str() of anything) with every control character but tab and newline made visible as an
    escape; ``one_line`` escapes tab and newline too (a file name, a title)."""
    text = _no_surrogates(str(text))
    return (_ANY_CONTROL if one_line else _CONTROL).sub(_escape, text)


def strip_controls(text: str) -> str:
    """``text`` without control characters other than tab and newline (lone surrogates replaced)."""
    return _CONTROL.sub("", _no_surrogates(text).replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs become one space, control characters are dropped."""
    return _ANY_CONTROL.sub("", " ".join(strip_controls(text).split()))
