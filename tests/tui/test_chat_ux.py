"""The chat as a new user meets it, in a real terminal (tmux) against the fake LLM server: Markdown replies,
prompt recall, several lines, :models without a key, the plan, and a cancelled reply kept in the session."""

from __future__ import annotations

import json
import os

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from test_tui import idle, say, start
from tmux_pane import have_tmux

pytestmark = pytest.mark.skipif(not have_tmux() and not os.environ.get("CI"), reason="tmux is not installed")

MARKDOWN = (
    "# Results\n\nSome **bold words** and *slanted* with `inline_code` here.\n\n"
    "- first item\n- second item\n\n1. one\n2. two\n\n> a quoted line\n\n"
    "```python\ndef f():\n    return 1\n```\n\nSee [the docs](https://example.org/docs). "
    "<img src=x onerror=alert(1)> END"
)


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


@pytest.fixture
def work(tmp_path):
    path = tmp_path / "work"
    path.mkdir()
    return path


@pytest.mark.parametrize("env", [{}, {"NO_COLOR": "1", "LC_ALL": "C", "LANG": "C"}], ids=["colour", "no-colour-C"])
def test_markdown_reply_is_rendered(srv, isolated_home, work, tmp_path, env):
    srv.enqueue(Reply(text=MARKDOWN, chunk_size=7))  # markers split across chunks while streaming
    with start(tmp_path, isolated_home, work, **env) as pane:
        screen = say(pane, "show me", "END")
        assert "# Results" in screen
        assert "Some bold words and slanted with inline_code here." in screen
        assert "**" not in screen and "`" not in screen
        assert "• first item" in screen and "• second item" in screen
        assert "1. one" in screen and "2. two" in screen
        assert "▌ a quoted line" in screen
        assert "│ def f():" in screen and "│     return 1" in screen and "```" not in screen
        assert "the docs (https://example.org/docs)" in screen
        assert "<img src=x onerror=alert(1)>" in screen  # model HTML is text
        coloured = pane.screen(colours=True)
        bold = next(line for line in coloured.splitlines() if "bold words" in line)
        assert "\x1b[1m" in bold  # bold is an attribute, so it shows under NO_COLOR too
        if not env:
            code = next(line for line in coloured.splitlines() if "inline_code" in line)
            assert "\x1b[36m" in code  # cyan inline code where there are colours
        pane.line(":q")


def test_up_recalls_prompts_and_ctrl_j_or_alt_enter_add_lines(srv, isolated_home, work, tmp_path):
    with start(tmp_path, isolated_home, work) as pane:
        say(pane, "first prompt", "echo: first prompt")
        say(pane, "second prompt", "echo: second prompt")
        pane.type("draft")
        pane.keys("Up")
        pane.wait_for(lambda s: "› second prompt" in s.splitlines()[-2])
        pane.keys("Up")
        pane.wait_for(lambda s: "› first prompt" in s.splitlines()[-2])
        pane.keys("Down", "Down")
        pane.wait_for(lambda s: "› draft" in s.splitlines()[-2])
        pane.keys("C-u")
        pane.type("line one")
        pane.keys("C-j")
        pane.type("line two")
        pane.keys("M-Enter")
        pane.type("line three")
        pane.keys("Enter")
        screen = pane.wait_for("│ line three │")
        assert "│ line one   │" in screen and "│ line two   │" in screen
        idle(pane)
        assert srv.requests[-1].body["messages"][-1]["content"] == "line one\nline two\nline three"
        srv.enqueue(Reply(text="\n\n".join(f"paragraph {n}" for n in range(40))))
        say(pane, "long", "paragraph 39")
        pane.keys("Up")  # recalls, does not scroll
        pane.wait_for(lambda s: "› long" in s.splitlines()[-2] and "% ↑" not in s.splitlines()[-1])
        pane.keys("C-u")
        pane.type("\x1b[<64;10;5M")  # the wheel, as a terminal reports it once the chat asks for mouse reports
        pane.wait_for(lambda s: "% ↑" in s.splitlines()[-1])
        pane.keys("S-Up")
        pane.keys("PageDown", "PageDown", "PageDown", "PageDown", "PageDown")
        pane.wait_for(lambda s: "% ↑" not in s.splitlines()[-1])
        pane.line(":help")
        screen = pane.wait_for("Alt+Enter or Ctrl-J new line")
        assert "↑/↓ earlier prompts" in screen
        pane.line(":q")


def test_models_marks_providers_without_a_key(srv, isolated_home, work, tmp_path):
    write_config(
        isolated_home,
        srv.base_url,
        provider_extra=(
            '[providers.openai]\nkind = "openai"\napi_base = "https://api.openai.com/v1"\n'
            'default_model = "gpt-x"\nenv_var = "OPENAI_API_KEY"\n'
        ),
    )
    with start(tmp_path, isolated_home, work) as pane:
        pane.line(":models")
        screen = pane.wait_for("─── Models")
        row = next(r for r in screen.splitlines() if "openai / gpt-x" in r)
        assert "✗ no API key: set OPENAI_API_KEY" in row
        assert "✗" not in next(r for r in screen.splitlines() if "fake / fake-model" in r)
        pane.keys("Down", "Down", "Enter")  # sorted: fake/fake-model (current), fake/other-model, openai/gpt-x
        screen = pane.wait_for("cannot be used")
        assert "openai / gpt-x cannot be used: no API key: set OPENAI_API_KEY" in " ".join(screen.split())
        assert "fake · fake-model" in screen.splitlines()[-1]  # still on the usable model
        pane.line(":q")


def test_plan_shows_in_the_chat(srv, isolated_home, work, tmp_path):
    plan = {
        "plan": [
            {"step": "read the code", "status": "completed"},
            {"step": "write the fix", "status": "in_progress"},
            {"step": "run the tests", "status": "pending"},
        ],
        "explanation": "found the bug",
    }
    srv.enqueue(Reply(tool_calls=[ToolCall("update_plan", plan)]), Reply(text="working on it"))
    with start(tmp_path, isolated_home, work) as pane:
        pane.line(":plan")
        pane.wait_for("no plan yet")
        screen = say(pane, "fix it", "working on it")
        assert "plan: found the bug" in screen
        assert "✓ read the code" in screen and "▸ write the fix" in screen and "○ run the tests" in screen
        pane.line(":plan")
        pane.wait_for(lambda s: s.count("▸ write the fix") == 3)
        pane.line(":q")


def test_a_cancelled_reply_is_kept_in_the_session(srv, isolated_home, work, tmp_path):
    srv.enqueue(Reply(text="partial " * 300 + "NEVER", delay=0.03))
    with start(tmp_path, isolated_home, work) as pane:
        pane.line("talk slowly")
        pane.wait_for(lambda s: s.count("partial") >= 10)
        pane.keys("C-c")
        pane.wait_for("cancelled")
        idle(pane)
        pane.line(":new")
        pane.wait_for("─── new session")
        pane.line(":sessions")
        pane.wait_for("─── Sessions")
        pane.keys("Down", "Enter")
        screen = pane.wait_for("session restored")
        assert "partial partial" in screen and "[Reply interrupted: stopped by the user." in " ".join(screen.split())
        pane.line(":q")
    (log,) = [p for p in (isolated_home / "history").glob("*.jsonl") if "talk slowly" in p.read_text()]
    assistant = [json.loads(line) for line in log.read_text().splitlines() if '"assistant"' in line]
    assert assistant and assistant[-1]["content"][0]["text"].startswith("partial partial")
    assert "NEVER" not in log.read_text()
    shown = openheim("sessions", "show", log.stem).stdout
    assert "partial partial" in shown and "Reply interrupted" in shown
