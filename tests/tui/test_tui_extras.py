"""The chat's images and dollars, in a real terminal (tmux): `:image PATH`, a pasted image path, `:cost`."""

from __future__ import annotations

import base64
import os
import re

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from image_fixtures import GIF, PNG, images_in
from tmux_pane import TmuxPane, have_tmux, openheim_command, tui_env

pytestmark = pytest.mark.skipif(not have_tmux() and not os.environ.get("CI"), reason="tmux is not installed")
PRICES = '[prices."fake/fake-model"]\ninput = 3.0\noutput = 15.0\n'


def test_images_attach_by_command_and_by_paste_and_cost_is_in_dollars(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "dot.png").write_bytes(PNG)
    (tmp_path / "drop.gif").write_bytes(GIF)
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra=PRICES)
        with TmuxPane(tmp_path, openheim_command(), tui_env(isolated_home), 100, 30, cwd=work) as pane:
            pane.wait_for("type a message to start")
            pane.line(":image dot.png")
            pane.wait_for("image attached: dot.png (image/png")
            pane.line(f"'{tmp_path}/drop.gif'")  # a path pasted (or dropped) into the line
            pane.wait_for("(2 attached)")
            pane.line(":image notes.txt")
            pane.wait_for("notes.txt does not exist")
            srv.enqueue(Reply(text="two dots", usage=(100_000, 1000)))
            pane.line("what are these")
            pane.wait_for("two dots")
            assert "[image 2: image/gif]" in pane.screen()
            assert images_in(srv.requests[0].body, "openai") == [
                ("image/png", base64.b64encode(PNG).decode()),
                ("image/gif", base64.b64encode(GIF).decode()),
            ]
            pane.line(":cost")
            screen = pane.wait_for("1 model call(s)")
            assert re.search(r"cost\s+\$0\.3150 \(subagents included\)", screen), screen


def test_the_chat_stops_a_turn_at_budgets_max_cost(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra=PRICES + "[budgets]\nmax_cost = 0.05\n")
        # each call: 10k input + 1k output = $0.045; the second one reaches the budget
        srv.enqueue(*[Reply(tool_calls=[ToolCall("list_dir", {"path": "."})], usage=(10_000, 1000)) for _ in range(3)])
        with TmuxPane(tmp_path, openheim_command(), tui_env(isolated_home), 100, 30, cwd=work) as pane:
            pane.wait_for("type a message to start")
            pane.line("look around")
            screen = pane.wait_for("stopped at the turn's cost budget")
            assert "$0.0900 spent of $0.05" in screen
        assert len(srv.requests) == 2
