"""A reply's Markdown as chat lines: bold, italic, inline code, fenced code, lists, headings, links and quotes.

Pure, no curses. The text is parsed by markdown-it-py (CommonMark) into a token stream, which is laid out
here as rows of (text, role) spans. Streaming-safe by construction: every repaint parses the whole reply so
far, and CommonMark reads an unfinished ``**`` as literal text and an unclosed fence as code to the end,
so a half-arrived reply never garbles what follows. Markers that carry meaning stay visible as text
(bullets, numbers, a quote bar, a code gutter, a link's address), so the reply reads the same with no
colours (NO_COLOR) or attributes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from openheim.tui.text import clip, width, wrap_line

if TYPE_CHECKING:
    from markdown_it.token import Token

Span = tuple[str, str]  # (text, role)
Row = list[Span]

BASE = "assistant"
CODE_GUTTER = "│ "
QUOTE_BAR = "▌ "
_WORDS = re.compile(r"\S+|\s+")


@lru_cache(maxsize=1)
def _parser() -> Any:
    """The CommonMark parser, built on first use (markdown-it is imported only by the chat)."""
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark", {"html": False, "linkify": False})


def render_markdown(text: str, cells: int, indent: str = "  ") -> list[Row]:
    """``text`` laid out as rows of at most ``cells`` cells, each starting with ``indent``."""
    tokens = _parser().parse(text)
    layout = _Layout(max(4, cells), indent)
    layout.blocks(tokens)
    return layout.rows or [[(indent, BASE)]]


@dataclass(eq=False)
class _Context:
    """A container a block sits in (a list item, a quote): its prefix on its first line and on the others."""

    first: str
    rest: str
    role: str = BASE
    used: bool = False  # the first line has been laid out: later blocks use ``rest``


@dataclass(eq=False)
class _Layout:
    cells: int
    indent: str
    rows: list[Row] = field(default_factory=list)
    stack: list[_Context] = field(default_factory=list)
    lists: list[list[int]] = field(default_factory=list)  # per open list: [next number] (or [-1]: bullets)

    # --- blocks ----------------------------------------------------------------------

    def blocks(self, tokens: list[Token]) -> None:
        for i, tok in enumerate(tokens):
            handler = getattr(self, "_" + tok.type, None)
            if handler is not None:
                handler(tok, tokens, i)

    def _prefixes(self) -> tuple[str, str]:
        """(first line prefix, later lines prefix) for a block opening here."""
        first = rest = self.indent
        for ctx in self.stack:
            first += ctx.rest if ctx.used else ctx.first
            rest += ctx.rest
            ctx.used = True
        return first, rest

    def _gap(self) -> None:
        """A blank line between top-level blocks (none inside lists, so items stay together)."""
        if self.rows and not self.lists and self.rows[-1] != [(self.indent.rstrip() or "", BASE)]:
            self.rows.append([("", BASE)])

    def _paragraph_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        if not tok.hidden:
            self._gap()

    def _heading_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        self._gap()
        level = int(tok.tag[1:]) if tok.tag[1:].isdigit() else 1
        self._inline_rows(tokens[i + 1], "md_heading", lead=[("#" * level + " ", "md_heading")])
        tokens[i + 1].type = "_done"

    def _inline(self, tok: Token, tokens: list[Token], i: int) -> None:
        role = self.stack[-1].role if self.stack else BASE
        self._inline_rows(tok, role)

    def _fence(self, tok: Token, tokens: list[Token], i: int) -> None:
        self._code(tok.content, tok.info.strip().split(" ")[0] if tok.info else "")

    def _code_block(self, tok: Token, tokens: list[Token], i: int) -> None:
        self._code(tok.content, "")

    def _code(self, content: str, language: str) -> None:
        self._gap()
        first, rest = self._prefixes()
        body = content[:-1] if content.endswith("\n") else content
        if language:
            self.rows.append([(first, BASE), (language, "md_dim")])
            first = rest
        for n, line in enumerate(body.split("\n")):
            lead = first if n == 0 else rest
            room = max(1, self.cells - width(lead) - width(CODE_GUTTER))
            for piece in _hard_wrap(line, room):
                self.rows.append([(lead, BASE), (CODE_GUTTER, "md_dim"), (piece, "md_code")])
                lead = rest

    def _bullet_list_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        if not self.lists:
            self._gap()
        self.lists.append([-1])

    def _ordered_list_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        if not self.lists:
            self._gap()
        start = tok.attrGet("start")
        self.lists.append([int(start) if isinstance(start, (int, str)) and str(start).isdigit() else 1])

    def _bullet_list_close(self, tok: Token, tokens: list[Token], i: int) -> None:
        self.lists.pop()

    _ordered_list_close = _bullet_list_close

    def _list_item_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        counter = self.lists[-1] if self.lists else [-1]
        if counter[0] < 0:
            marker = "• "
        else:
            marker = f"{counter[0]}. "
            counter[0] += 1
        self.stack.append(_Context(marker, " " * width(marker)))

    def _list_item_close(self, tok: Token, tokens: list[Token], i: int) -> None:
        if self.stack:
            self.stack.pop()

    def _blockquote_open(self, tok: Token, tokens: list[Token], i: int) -> None:
        self._gap()
        self.stack.append(_Context(QUOTE_BAR, QUOTE_BAR, "md_quote"))

    def _blockquote_close(self, tok: Token, tokens: list[Token], i: int) -> None:
        if self.stack:
            self.stack.pop()

    def _hr(self, tok: Token, tokens: list[Token], i: int) -> None:
        self._gap()
        first, _ = self._prefixes()
        self.rows.append([(first, BASE), ("─" * max(3, min(40, self.cells - width(first))), "md_dim")])

    # --- inline ------------------------------------------------------------------------

    def _inline_rows(self, tok: Token, role: str, lead: Row | None = None) -> None:
        spans = list(lead or []) + _inline_spans(tok.children or [], role)
        first, rest = self._prefixes()
        if self.stack and self.stack[-1].role == "md_quote":
            first_role = "md_quote"
        else:
            first_role = BASE
        for n, line in enumerate(_split_lines(spans)):
            for row in wrap_spans(line, self.cells, first if n == 0 else rest, rest, first_role):
                self.rows.append(row)
            first = rest


def _inline_spans(children: list[Token], base: str) -> list[Span]:
    """An inline token's children as spans: strong, em, code and links styled; breaks as newlines."""
    out: list[Span] = []
    styles: list[str] = []
    link: list[str | None] = []
    for child in children:
        kind = child.type
        role = styles[-1] if styles else base
        if kind == "text":
            out.append((child.content, role))
        elif kind == "code_inline":
            out.append((child.content, "md_code"))
        elif kind in ("softbreak", "hardbreak"):
            out.append(("\n", role))
        elif kind == "strong_open":
            styles.append("md_bold_italic" if role == "md_italic" else "md_bold")
        elif kind == "em_open":
            styles.append("md_bold_italic" if role == "md_bold" else "md_italic")
        elif kind in ("strong_close", "em_close"):
            if styles:
                styles.pop()
        elif kind == "link_open":
            href = child.attrGet("href")
            link.append(href if isinstance(href, str) else None)
            styles.append("md_link")
        elif kind == "link_close":
            if styles:
                styles.pop()
            href = link.pop() if link else None
            if href and not _shown_already(out, href):
                out.append((f" ({href})", "md_dim"))
        elif kind == "image":
            out.append((f"[image: {child.content or child.attrGet('src')}]", "md_dim"))
        elif kind in ("html_inline",):
            out.append((child.content, role))
    return out


def _shown_already(spans: list[Span], href: str) -> bool:
    """An autolink (<https://...>) shows its address as its text: no need to repeat it."""
    return bool(spans) and spans[-1][0] in (href, href.removeprefix("mailto:"))


def _split_lines(spans: list[Span]) -> list[list[Span]]:
    lines: list[list[Span]] = [[]]
    for text, role in spans:
        parts = text.split("\n")
        for n, part in enumerate(parts):
            if n:
                lines.append([])
            if part:
                lines[-1].append((part, role))
    return lines


def wrap_spans(spans: list[Span], cells: int, first: str, rest: str, prefix_role: str = BASE) -> list[Row]:
    """Styled text word-wrapped to ``cells``: each row starts with its prefix; long words are broken."""
    rows: list[Row] = []
    row: Row = [(first, prefix_role)]
    used = width(first)
    room = max(1, cells - used)
    pending_space: Span | None = None
    for text, role in spans:
        for word in _WORDS.findall(text):
            if word.isspace():
                if used > width(first if not rows else rest):
                    pending_space = (" ", role)
                continue
            w = width(word)
            space = 1 if pending_space else 0
            if used + space + w > cells and used > width(rest if rows else first):
                rows.append(row)
                row, used, pending_space = [(rest, prefix_role)], width(rest), None
                space = 0
            if pending_space:
                row.append(pending_space)
                used += 1
                pending_space = None
            room = max(1, cells - width(rest))
            while used + w > cells and w > room:
                head = _clip_cells(word, cells - used)
                if not head:
                    rows.append(row)
                    row, used = [(rest, prefix_role)], width(rest)
                    continue
                row.append((head, role))
                rows.append(row)
                row, used = [(rest, prefix_role)], width(rest)
                word = word[len(head) :]
                w = width(word)
            row.append((word, role))
            used += w
    rows.append(row)
    return [_merged(r) for r in rows]


def _merged(row: Row) -> Row:
    """Neighbouring spans of one role as one (fewer writes to the screen)."""
    out: Row = []
    for text, role in row:
        if out and out[-1][1] == role:
            out[-1] = (out[-1][0] + text, role)
        elif text:
            out.append((text, role))
    return out


def _clip_cells(word: str, cells: int) -> str:

    return clip(word, cells)


def _hard_wrap(line: str, cells: int) -> list[str]:
    """A code line broken at ``cells`` (code is not word-wrapped: spacing is part of it)."""
    if width(line) <= cells:
        return [line]
    return wrap_line(line, cells) if not line.strip() else _chunks(line, cells)


def _chunks(line: str, cells: int) -> list[str]:
    out = []
    while line:
        head = _clip_cells(line, cells) or line[0]
        out.append(head)
        line = line[len(head) :]
    return out
