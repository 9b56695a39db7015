"""The chat's Markdown layout (pure): styles, markers kept as text, width, and streaming safety."""

from __future__ import annotations

from openheim.tui.markdown import render_markdown
from openheim.tui.text import width

DOC = (
    "## Plan\n\nUse **bold**, *em*, ***both*** and `code`.\n\n- a\n  - nested **b**\n- c\n\n"
    "3. three\n4. four\n\n> quoted\n> more\n\n```sh\necho 'x'   # spaced\n```\n\n---\n\n"
    "[link](https://e.org) and <https://auto.org>\n"
)


def text(rows) -> list[str]:
    return ["".join(t for t, _ in row) for row in rows]


def roles(rows, needle: str) -> set[str]:
    return {r for row in rows for t, r in row if needle in t}


def test_blocks_and_inline_styles():
    rows = render_markdown(DOC, 60)
    lines = text(rows)
    assert "  ## Plan" in lines
    assert "  Use bold, em, both and code." in lines
    assert roles(rows, "bold") == {"md_bold"} and roles(rows, "em") == {"md_italic"}
    assert roles(rows, "both") == {"md_bold_italic"} and roles(rows, "code") == {"md_code"}
    assert "  • a" in lines and "    • nested b" in lines and "  • c" in lines
    assert "  3. three" in lines and "  4. four" in lines
    assert "  ▌ quoted" in lines and "  ▌ more" in lines
    assert "  sh" in lines and "  │ echo 'x'   # spaced" in lines  # code keeps its spacing
    assert any(line.strip().startswith("───") for line in lines)
    assert "  link (https://e.org) and https://auto.org" in lines  # an autolink is not repeated


def test_every_row_fits_the_width():
    long = "word " * 50 + "`" + "x" * 90 + "`\n\n```\n" + "y" * 200 + "\n```\n- " + "z " * 80
    for cells in (12, 20, 40, 80):
        for row in text(render_markdown(long, cells)):
            assert width(row) <= cells, (cells, row)


def test_streaming_prefixes_never_garble_what_is_there():
    """Each prefix of a reply, as it streams in, renders without error; an unfinished ** or fence shows as
    text or code up to the end, and once closed, the words render styled and the markers disappear."""
    for n in range(len(DOC) + 1):
        rows = render_markdown(DOC[:n], 50)
        assert rows
    half = text(render_markdown("Use **bol", 50))
    assert half == ["  Use **bol"]
    fence = text(render_markdown("Before\n\n```py\nx = 1\ny = ", 50))
    assert fence[-2:] == ["  │ x = 1", "  │ y ="] or fence[-2:] == ["  │ x = 1", "  │ y = "]
    done = text(render_markdown("Use **bold** now", 50))
    assert done == ["  Use bold now"]


def test_model_html_is_text():
    lines = text(render_markdown("<script>alert(1)</script>\n\nhi <img src=x onerror=alert(1)>", 60))
    assert "  <script>alert(1)</script>" in lines and "  hi <img src=x onerror=alert(1)>" in lines
