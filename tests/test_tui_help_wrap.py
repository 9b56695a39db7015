"""`:help` and other info text in the chat wrap with a hanging indent (issue 42 item 12): a long command line
goes on under its description, not at the left edge."""

from __future__ import annotations

from openheim.tui.overlay import HELP
from openheim.tui.text import width, wrap_hanging
from openheim.tui.transcript import Item, render


def test_help_at_100_columns_hangs_under_the_description_column():
    lines = wrap_hanging(HELP, 98)
    assert all(width(line) <= 98 for line in lines)
    undo = next(i for i, line in enumerate(lines) if line.startswith("  :undo"))
    description = lines[undo].index("show")
    follow = lines[undo + 1]
    assert follow.startswith(" " * description) and not follow.startswith(" " * (description + 1))
    assert follow.strip() and follow.strip() in HELP  # the rest of the :undo description, under its start


def test_a_line_without_a_second_column_keeps_its_own_indent():
    lines = wrap_hanging("  Enter send · Alt+Enter new line · Ctrl-C cancel the reply (quit when idle)", 30)
    assert len(lines) > 1 and all(line.startswith("  ") and not line.startswith("   ") for line in lines)


def test_the_chat_renders_help_with_the_hanging_indent():
    rows = [line.text for line in render(Item("info", HELP), 100)]
    assert all(width(row) <= 100 for row in rows)
    image = next(i for i, row in enumerate(rows) if row.lstrip().startswith(":undo"))
    assert rows[image + 1].startswith(" " * rows[image].index("show"))
