"""The chat in tmux: compaction (automatic and :compact), :undo of a file-changing turn, :fork."""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer
from long_helpers import SummarisingServer, changing_turn, seed_tree, tree
from test_tui import idle, say, start
from tmux_pane import have_tmux

pytestmark = pytest.mark.skipif(not have_tmux() and not os.environ.get("CI"), reason="tmux is not installed")

ALLOW = '[permissions]\nallow = ["write_file", "edit_file", "execute_command"]\n'


def test_chat_compacts_by_itself_and_on_command(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with SummarisingServer() as srv:
        write_config(isolated_home, srv.base_url, provider_extra="context_window = 3000")
        with start(tmp_path, isolated_home, work, width=120, height=40) as pane:
            screens = []
            for turn in range(8):
                pane.line(f"turn {turn}: " + "remember this please " * 12)
                pane.wait_for(lambda s, n=turn + 1: len(srv.requests) - len(srv.summary_requests) == n)
                screens.append(idle(pane))
            assert any("conversation compacted:" in screen for screen in screens)
            automatic = len(srv.summary_requests)
            assert automatic >= 1
            pane.line(":compact")
            pane.wait_for(lambda s: "conversation compacted:" in s.partition("compacting the conversation…")[2])
            idle(pane)
            assert len(srv.summary_requests) == automatic + 1
            pane.line("still there?")
            pane.wait_for(lambda s: len(srv.requests) - len(srv.summary_requests) == 9)
            screen = idle(pane)
            assert "still there?" in screen.rpartition("echo: ")[2]
    session = next((isolated_home / "history").glob("*.jsonl"))
    lines = [json.loads(x) for x in session.read_text().splitlines()]
    assert sum(1 for x in lines if "role" in x) == 18
    assert sum(1 for x in lines if x.get("event") == "compaction") == automatic + 1


def test_chat_undo_restores_a_turn_and_fork_splits_the_session(isolated_home, tmp_path):
    root = tmp_path / "work"
    seed_tree(root)
    original = tree(root)
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra="allow_shell = true\n" + ALLOW)
        srv.enqueue(*changing_turn())
        with start(tmp_path, isolated_home, root, width=120, height=40) as pane:
            say(pane, "change some files", "done changing files")
            assert tree(root) != original
            pane.line(":undo")
            screen = pane.wait_for("type :undo 1 yes")
            assert "M edit_me.txt | +1 -1" in screen and "A new/added.txt" in screen
            assert tree(root) != original
            pane.line(":undo 1 yes")
            pane.wait_for("restored 3 file(s), removed 2")
            assert tree(root) == original
            pane.line(":fork")
            pane.wait_for("forked: this is a new session")
            say(pane, "only in the fork", "echo: only in the fork")
    logs = sorted((isolated_home / "history").glob("*.jsonl"), key=lambda p: len(p.read_text()))
    assert len(logs) == 2
    short, long = ([json.loads(x) for x in p.read_text().splitlines()] for p in logs)
    assert long[: len(short)] == short and "only in the fork" in json.dumps(long[len(short) :])
