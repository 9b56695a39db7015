"""Text from a model, a tool or a file, made safe to print on a terminal: control characters (ESC, C1,
DEL; so no OSC 52 clipboard write, title change, screen clear or DCS) are dropped, as the chat does."""

from __future__ import annotations

import re

_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")  # all C0 but tab and newline, DEL, all C1
_ANY_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """``text`` without control characters other than tab and newline (lone surrogates replaced)."""
    if any("\ud800" <= c <= "\udfff" for c in text):
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return _CONTROL.sub("", text.replace("\r\n", "\n"))


def one_line(text: str) -> str:
    """``text`` as one printable line: whitespace runs become one space, control characters are dropped."""
    return _ANY_CONTROL.sub("", " ".join(strip_controls(text).split()))
