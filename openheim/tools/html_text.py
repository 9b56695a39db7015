"""HTML to readable text for web_fetch, on the standard library's ``html.parser``.

Every named and numeric character reference is decoded (``html.unescape`` rules, via ``convert_charrefs``);
scripts, styles and comments are dropped; block tags break the line; other tags are removed.
"""

from __future__ import annotations

from html.parser import HTMLParser

_BLOCK = frozenset(
    [
        "address",
        "article",
        "aside",
        "blockquote",
        "br",
        "dd",
        "div",
        "dl",
        "dt",
        "figcaption",
        "figure",
        "footer",
        "form",
        "h1",
        "h2",
        "h3",
        "h4",
        "h5",
        "h6",
        "header",
        "hr",
        "li",
        "main",
        "nav",
        "ol",
        "p",
        "pre",
        "section",
        "table",
        "td",
        "th",
        "title",
        "tr",
        "ul",
    ]
)
_HIDDEN = frozenset(("script", "style"))
_ASCII_SPACE = " \t\r\f\v"  # not str.strip()'s Unicode set: a non-breaking space is text the page meant


class _TextParser(HTMLParser):
    """Collects the text of a document; comments and declarations fall to HTMLParser's no-op handlers."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.hidden: str | None = None  # the script/style element being skipped

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _HIDDEN:
            self.hidden = tag
        elif tag in _BLOCK and self.hidden is None:
            self.parts.append("\n")

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _BLOCK and self.hidden is None:  # <br/>: one break, not an open and a close
            self.parts.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == self.hidden:
            self.hidden = None
        elif tag in _BLOCK and self.hidden is None:
            self.parts.append("\n")

    def handle_data(self, data: str) -> None:
        if self.hidden is None:
            self.parts.append(data)


def _tidy(text: str) -> str:
    """Trim each line (ASCII spaces only) and collapse runs of blank lines into one."""
    out: list[str] = []
    for line in text.split("\n"):
        line = line.strip(_ASCII_SPACE)
        if line or (out and out[-1]):
            out.append(line)
    while out and not out[-1]:
        out.pop()
    return "\n".join(out)


def html_to_text(html: str) -> str:
    """Readable text of an HTML document (pure)."""
    parser = _TextParser()
    parser.feed(html.replace("\r\n", "\n").replace("\r", "\n"))
    parser.close()
    return _tidy("".join(parser.parts))
