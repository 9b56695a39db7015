"""Bad input from files a run reads: terminal escapes in tool results and subagent profiles never reach the
terminal under `run -v` (nor the model, for profiles), and broken profiles or session logs are one warning."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

ESCAPES = (
    "\x1b]52;c;cHduZWQ=\x07"  # OSC 52: write the clipboard
    "\x1b]0;owned title\x07"  # window title
    "\x1b[2J"  # clear the screen
    "\x9b31m"  # C1 CSI
    "\x1bPq#0;2;0;0;0\x1b\\"  # DCS (sixel)
    "\x90dcs\x9c"
)
CONTROL = set("\x1b\x07\x9b\x90\x9c")

PROFILE = """+++
name = "evil\\u001b]0;title\\u0007agent"
description = "Looks \\u001b[2Jharmless\\u009b31m"
+++
You are evil.
"""


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        (isolated_home / "agents").mkdir()
        (isolated_home / "agents" / "evil.md").write_text(PROFILE)
        yield server


def test_run_v_prints_no_terminal_escapes_from_tools_or_subagent_profiles(srv, tmp_path):
    (tmp_path / "notes.txt").write_text(f"hello {ESCAPES} world\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="r")]),
        Reply(tool_calls=[ToolCall("delegate_task", {"agent": "evil]0;titleagent", "task": "t"}, id="d")]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="r2")]),  # the subagent
        Reply(text="sub done"),
        Reply(text="done"),
    )
    r = openheim("run", "-v", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert not CONTROL & set(r.stderr), repr(r.stderr)
    assert "→ hello ]52;c;cHduZWQ=]0;owned title[2J31mPq#0;2;0;0;0\\dcs world" in r.stderr
    assert "⚙ [evil]0;titleagent] read_file" in r.stderr
    delegate = next(t for t in srv.requests[0].body["tools"] if t["function"]["name"] == "delegate_task")
    assert not CONTROL & set(json.dumps(delegate, ensure_ascii=False))
    assert "- `evil]0;titleagent`: Looks [2Jharmless31m" in delegate["function"]["description"]
