"""HTML to readable text for web_fetch: drop scripts and styles, break at block tags, strip the rest."""

from __future__ import annotations

import re

_HIDDEN = re.compile(r"<(script|style)\b[^>]*>.*?</\1\s*>", re.I | re.S)
_HIDDEN_UNCLOSED = re.compile(r"<(script|style)\b.*\Z", re.I | re.S)
_COMMENT = re.compile(r"<!--.*?(-->|\Z)", re.S)
_BLOCK = re.compile(
    r"</?(?:address|article|aside|blockquote|br|dd|div|dl|dt|figcaption|figure|footer|form|h[1-6]|header|"
    r"hr|li|main|nav|ol|p|pre|section|table|td|th|title|tr|ul)\b[^>]*>",
    re.I,
)
_TAG = re.compile(r"<[^>]*>")
_ENTITY = re.compile(r"&(nbsp|amp|quot|apos|lt|gt|#\d{1,7}|#[xX][0-9a-fA-F]{1,6});")
_NAMED = {"nbsp": " ", "amp": "&", "quot": '"', "apos": "'", "lt": "<", "gt": ">"}


def _entity(match: re.Match) -> str:
    name = match.group(1)
    if name in _NAMED:
        return _NAMED[name]
    code = int(name[2:], 16) if name[1] in "xX" else int(name[1:])
    try:
        return chr(code) if code else match.group(0)
    except (ValueError, OverflowError):
        return match.group(0)


def _tidy(text: str) -> str:
    """Trim each line and collapse runs of blank lines into one."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.strip()
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def html_to_text(html: str) -> str:
    """Readable text of an HTML document (pure)."""
    text = _COMMENT.sub("", html)
    text = _HIDDEN.sub("", text)
    text = _HIDDEN_UNCLOSED.sub("", text)
    text = _BLOCK.sub("\n", text)
    text = _TAG.sub("", text)
    text = _ENTITY.sub(_entity, text)
    return _tidy(text.replace("\r\n", "\n").replace("\r", "\n"))
