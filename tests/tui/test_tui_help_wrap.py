"""`:help` and other info text in the chat wrap with a hanging indent (issue 42 item 12): a long command line
goes on under its description, not at the left edge."""

from __future__ import annotations

import os

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer
from test_tui import start
from tmux_pane import have_tmux

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


@pytest.mark.skipif(not have_tmux() and not os.environ.get("CI"), reason="tmux is not installed")
def test_help_in_a_real_100_column_terminal_hangs_under_the_description(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        with start(tmp_path, isolated_home, work, width=100, height=50) as pane:
            pane.line(":help")
            screen = pane.wait_for(":undo")
            rows = screen.split("\n")
            undo = next(i for i, row in enumerate(rows) if row.lstrip().startswith(":undo"))
            column = rows[undo].index("show")
            follow = rows[undo + 1]
            assert follow[:column].strip() == "" and follow[column : column + 1].strip(), screen
            pane.line(":q")
