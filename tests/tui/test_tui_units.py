"""The TUI's pure parts, no terminal: cell widths, wrapping, the input line, the transcript, scrolling,
keys, themes, overlays, the permission gate, the theme save, and the whole frame at every size."""

from __future__ import annotations

import queue
import threading
import time

import pytest

from openheim.config.edit import save_theme, with_theme
from openheim.core.asking import AskTheFrontEnd
from openheim.core.events import PermissionAsked
from openheim.core.permission import Decision, PermissionRequest
from openheim.core.turn_context import CancelToken
from openheim.errors import ConfigError
from openheim.tui.editor import InputLine
from openheim.tui.gate import Questions
from openheim.tui.keys import Key, KeyDecoder
from openheim.tui.overlay import ListView, footer_text, permission_lines, usage_text
from openheim.tui.screen import FALLBACK_TERM, pick_term
from openheim.tui.text import (
    char_width,
    clip,
    clip_left,
    ellipsize,
    wrap,
    wrap_prefixed,
)
from openheim.tui.text import width as cells
from openheim.tui.theme import Style, style, theme_name
from openheim.tui.transcript import Item, Scroll, Transcript, render

# --- widths and wrapping ---------------------------------------------------------------------------


def test_cell_widths_of_wide_combining_and_joining_characters():
    assert [char_width(c) for c in "a日😀é"] == [1, 2, 2, 1]
    assert char_width("\u0301") == 0 and char_width("\u200d") == 0 and char_width("\ufe0f") == 0
    assert cells("héllo 世界") == 10
    assert cells("e\u0301") == 1


def test_clip_never_splits_a_wide_character():
    assert clip("日本語", 3) == "日"
    assert clip("日本語", 4) == "日本"
    assert clip_left("日本語", 3) == "語"
    assert ellipsize("日本語テキスト", 7) == "日本語…"
    assert clip("abc", 0) == ""


@pytest.mark.parametrize(
    "text",
    [
        "the quick brown fox jumps over the lazy dog " * 5,
        "日本語のテキストはスペースなしで続きます" * 3,
        "emoji 😀😀😀😀😀😀 and words",
        "averyveryveryveryverylongwordwithoutanyspaces and more",
    ],
)
@pytest.mark.parametrize("w", [1, 2, 5, 13, 40])
def test_wrapped_lines_fit_and_keep_every_character(text, w):
    lines = wrap(text, w)
    assert all(cells(line) <= max(w, 2) for line in lines)  # one wide char in a 1-cell line still moves on
    assert "".join(lines).replace(" ", "") == text.replace(" ", "")


def test_wrap_keeps_words_indentation_and_blank_lines():
    assert wrap("hello world foo", 11) == ["hello world", "foo"]
    assert wrap("    indented code line", 30) == ["    indented code line"]
    assert wrap("a\n\nb", 10) == ["a", "", "b"]
    assert wrap_prefixed("one two three", 9, "  ") == ["  one two", "  three"]
    assert wrap_prefixed("abc", 10, "  ≫ ") == ["  ≫ abc"]


# --- the input line -----------------------------------------------------------------------------


def test_editing_keys_move_over_whole_characters():
    line = InputLine()
    line.insert("cafe\u0301!")  # é as e + combining accent
    line.left()
    line.left()
    assert line.cursor == 3  # before the "e", not between it and its accent
    line.right()
    line.backspace()
    assert line.text == "caf!"
    line.home()
    line.delete()
    assert line.text == "af!"
    line.end()
    line.insert(" more words")
    line.delete_word()
    assert line.text == "af! more "
    line.home()
    line.kill_to_end()
    assert line.text == "" and line.take() == ""


def test_input_view_scrolls_to_keep_the_cursor_visible_and_reserves_the_last_column():
    line = InputLine()
    line.insert("0123456789" * 3)
    text, col = line.view(10)
    assert text == "123456789" and col == 9  # nine cells of text, the cursor in the tenth
    for _ in range(25):
        line.left()
    text, col = line.view(10)
    assert text.startswith("5") and col == 0
    line.home()
    assert line.view(10) == ("012345678", 0)


def test_input_view_measures_wide_characters_and_shows_newlines():
    line = InputLine()
    line.insert("日本語\nabc\tx")
    text, col = line.view(40)
    assert text == "日本語↵abc x" and col == 12
    for w in range(2, 12):
        text, col = line.view(w)
        assert cells(text) <= w - 1 and col <= w - 1


# --- transcript and scrolling --------------------------------------------------------------------


def test_items_render_by_kind():
    box = render(Item("user", "hi 世界"), 80)
    assert [line.text for line in box] == ["╭─────────╮", "│ hi 世界 │", "╰─────────╯"]
    long = render(Item("user", "word " * 40), 80)
    assert max(cells(line.text) for line in long) <= 50
    assert render(Item("assistant", "answer"), 80)[0].text == "  answer"
    assert render(Item("thinking", "hmm"), 80)[0] == ("  ≫ hmm", "thinking")
    assert render(Item("tool", "Read a.txt", status="ok"), 80)[0] == ("⚙ Read a.txt", "tool_ok")
    assert render(Item("tool", "Read a.txt", status="error"), 80)[0].role == "tool_error"
    result = render(Item("result", "x" * 500), 400)[0].text
    assert result.startswith("    → ") and len(result) == len("    → ") + 200
    assert render(Item("result", "denied", status="error"), 80)[0] == ("    ✗ denied", "result_error")
    assert render(Item("error", "boom"), 80)[0] == ("  error: boom", "error")
    assert render(Item("rule", "new session"), 80)[0].text == "─── new session"
    assert render(Item("assistant", "bad\x1b[31m\udcff"), 80)[0].text == "  bad[31m�"


def test_streamed_text_rewraps_only_what_changed():
    t = Transcript()
    t.add("user", "q")
    t.stream("assistant", "hello")
    first = t.lines(40)
    t.stream("assistant", " world")
    assert t.lines(40)[-1].text == "  hello world" and len(t.items) == 2
    assert t.lines(40) is t.lines(40)
    assert first[0] is t.lines(40)[0]
    t.close_stream()
    t.stream("assistant", "next")
    assert len(t.items) == 3


def test_insert_after_keeps_a_tool_calls_lines_together():
    t = Transcript()
    a = t.add("tool", "A")
    t.add("tool", "B")
    t.insert_after(a, "result", "ra")
    assert [i.text for i in t.items] == ["A", "ra", "B"]
    t.insert_after(Item("tool", "gone"), "result", "end")
    assert t.items[-1].text == "end"


def test_scroll_follows_until_the_user_scrolls_up_and_pins_again_at_the_bottom():
    s = Scroll()
    assert s.first(100, 10) == 90 and s.pinned
    s.by(-5, 100, 10)
    assert not s.pinned and s.first(100, 10) == 85
    assert s.first(150, 10) == 85  # new lines arrive: the view stays where the user put it
    assert s.percent(150, 10) == 85 * 100 // 140
    s.by(200, 150, 10)
    assert s.pinned and s.first(160, 10) == 150
    s.by(-1000, 160, 10)
    assert s.first(160, 10) == 0
    assert Scroll().first(3, 10) == 0 and Scroll().percent(3, 10) == 100


# --- keys, themes, overlays ----------------------------------------------------------------------


def test_bracketed_paste_is_text_not_keys():
    d = KeyDecoder()
    out = []
    for ch in "a\x1b[200~line1\rline2\x1b[201~b":
        out += d.feed(ch)
    assert out == [Key("text", "a"), Key("paste", "line1\nline2"), Key("text", "b")]
    assert d.feed("\x1b") == [] and d.flush() == [Key("key", "esc")]
    assert d.feed("\x1b") == [] and d.feed("x") == [Key("key", "esc"), Key("text", "x")]
    assert d.feed("\x7f") == [Key("key", "backspace")] and d.feed("\x15") == [Key("key", "ctrl-u")]
    assert d.feed(Key("key", "left")) == [Key("key", "left")]


def test_themes_colours_and_no_color():
    assert theme_name(None) == "gray" and theme_name("nope") == "white" and theme_name("pink") == "pink"
    assert style("info", "pink", 256) == Style(9)
    assert style("info", "pink", 8) == Style(1, bold=True)  # light red on an 8-colour terminal
    assert style("tool_ok", "gray", 8).fg == 2 and style("error", "gray", 256).fg == 1
    for role in ("info", "tool_ok", "error", "thinking", "selected", "assistant"):
        assert style(role, "blue", 0).fg == -1  # NO_COLOR: attributes only
    assert style("selected", "blue", 0).reverse and style("thinking", "blue", 0).dim


def test_unknown_term_falls_back():
    known = {"xterm", "screen", "tmux-256color", "xterm-256color"}.__contains__
    assert pick_term("screen", known) == "screen"
    assert pick_term("no-such-terminal", known) == FALLBACK_TERM
    assert pick_term(None, known) == FALLBACK_TERM and pick_term("dumb", known) == FALLBACK_TERM


def test_list_view_moves_and_clamps():
    v = ListView("Pick", [f"row {i}" for i in range(20)], list(range(20)), on_pick=lambda x: None)
    v.move(15, 7)
    assert v.index == 15 and v.top == 11  # five body rows at height 7
    lines = v.lines(7, 30)
    assert lines[0].text.startswith("─── Pick") and ("› row 15", "selected") in lines
    v.move(100, 7)
    assert v.chosen() == 19
    viewer = ListView("View", ["a", "b"])
    viewer.move(5, 10)
    assert viewer.top == 0 and not viewer.picker
    assert ListView("Empty", [], empty="nothing here").lines(5, 30)[1].text == "  nothing here"


@pytest.mark.parametrize("height", range(12))
def test_permission_prompt_fits_any_height(height):
    lines = permission_lines("Write a.txt", [], 0, 3, height, 40)
    assert len(lines) <= height and all(cells(line.text) <= 40 for line in lines)
    if height >= 6:
        assert lines[0].text.startswith("─── permission (2 more waiting)")
        assert [line.text.strip() for line in lines[-4:]] == [
            "› Allow once (y)",
            "Allow always (a)",
            "Reject once (n)",
            "Reject always (r)",
        ]
    elif height >= 1:
        assert "y allow once" in lines[-1].text


def test_footer_and_usage_text():
    assert usage_text(950) == "950" and usage_text(12345) == "12.3k"
    for w in (1, 10, 30, 80):
        assert cells(footer_text(" ⠋ streaming…", "fake · fake-model · 1.2k ctx", w)) <= w
    assert footer_text("a", "b", 5) == "a   b"


# --- permission questions -----------------------------------------------------------------------------

REQ = PermissionRequest("call-1", "write_file", '{"path": "a"}')


def _ask_in_thread(questions: Questions, req: PermissionRequest = REQ, cancel: CancelToken | None = None) -> list:
    """The tool thread asks through the front end's gate; its PermissionAsked event reaches the chat's list."""
    asked: queue.Queue = queue.Queue()
    gate = AskTheFrontEnd().for_turn(asked.put)
    out: list = []
    threading.Thread(target=lambda: out.append(gate.request(req, cancel)), daemon=True).start()
    event = asked.get(timeout=5)
    assert isinstance(event, PermissionAsked) and event.question.request == req
    questions.add(event.question)
    return out


def _wait(out: list) -> Decision:
    deadline = time.monotonic() + 5
    while not out and time.monotonic() < deadline:
        time.sleep(0.01)
    return out[0]


def test_a_question_is_an_event_the_chat_answers():
    questions = Questions()
    out = _ask_in_thread(questions)
    ask = questions.current()
    assert ask is not None and ask.request == REQ and not out
    questions.answer(ask, Decision.ALLOW_ALWAYS)
    assert _wait(out) == Decision.ALLOW_ALWAYS and questions.current() is None


def test_a_question_is_rejected_when_the_turn_is_cancelled_or_the_chat_goes_away():
    questions, cancel = Questions(), CancelToken()
    out = _ask_in_thread(questions, cancel=cancel)
    cancel.cancel()
    assert _wait(out) == Decision.REJECT_ONCE and questions.current() is None  # the stale question is gone
    out = _ask_in_thread(questions)
    questions.close()
    assert _wait(out) == Decision.REJECT_ONCE
    late = _ask_in_thread(questions)  # closed: rejected as soon as it arrives
    assert _wait(late) == Decision.REJECT_ONCE


def test_an_unbound_gate_asks_nobody_and_rejects():
    assert AskTheFrontEnd().request(REQ) == Decision.REJECT_ONCE


def test_questions_are_shown_one_at_a_time_in_order():
    questions = Questions()
    first = _ask_in_thread(questions)
    second = _ask_in_thread(questions, PermissionRequest("call-2", "write_file", "{}"))
    assert questions.waiting() == 2 and questions.current().request.tool_call_id == "call-1"
    questions.answer(questions.current(), Decision.REJECT_ONCE)
    assert _wait(first) == Decision.REJECT_ONCE
    assert questions.current().request.tool_call_id == "call-2"
    questions.answer(questions.current(), Decision.ALLOW_ONCE)
    assert _wait(second) == Decision.ALLOW_ONCE


# --- saving the theme ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("", '[tui]\ntheme_color = "blue"\n'),
        ("a = 1\n", 'a = 1\n\n[tui]\ntheme_color = "blue"\n'),
        ("a = 1", 'a = 1\n\n[tui]\ntheme_color = "blue"'),
        ('[tui]  # look\ntheme_color = "red"  # mine\n[x]\n', '[tui]  # look\ntheme_color = "blue"\n[x]\n'),
        ("[tui]\nother = 1\n\n[x]\ny = 2\n", '[tui]\nother = 1\ntheme_color = "blue"\n\n[x]\ny = 2\n'),
        ('[x]\ntheme_color = "red"\n[tui]\n', '[x]\ntheme_color = "red"\n[tui]\ntheme_color = "blue"\n'),
    ],
)
def test_theme_is_saved_by_a_line_edit(before, after):
    assert with_theme(before, "blue") == after


def test_save_theme_refuses_bad_names_and_leaves_the_file_untouched(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('# my config\ntui = { theme_color = "red" }\n')
    for bad in ('a"b', "a\\b", "a\nb"):
        with pytest.raises(ConfigError):
            save_theme(path, bad)
    with pytest.raises(ConfigError, match="by hand"):
        save_theme(path, "blue")  # an inline [tui] table cannot take a second [tui] header
    assert path.read_text() == '# my config\ntui = { theme_color = "red" }\n'
    with pytest.raises(ConfigError, match="no config file"):
        save_theme(None, "blue")
    path.write_text("# keep me\n[tui]\n")
    path.chmod(0o600)
    save_theme(path, "cyan")
    assert path.read_text() == '# keep me\n[tui]\ntheme_color = "cyan"\n' and path.stat().st_mode & 0o777 == 0o600


# --- the whole frame --------------------------------------------------------------------------------


@pytest.fixture
def app(tmp_path):
    from openheim.client import OpenheimClient
    from openheim.tui.app import App

    client = OpenheimClient.builder().provider("local").api_base("http://127.0.0.1:9/v1").model("m").build()
    app = App(client, client.new_session(tmp_path), ["a"], "9.9")
    yield app
    client.close()


def _texts(rows) -> list[str]:
    return ["".join(text for text, _ in row) for row in rows]


def test_welcome_screen(app):
    rows, cursor = app.frame(24, 80)
    text = _texts(rows)
    assert text[0] == "  openheim  v9.9" and text[1] == "  m  ·  local  ·  skills: a"
    assert text[-2].startswith("  ›") and text[-1].rstrip().endswith("local · m")
    assert cursor == (22, 4)


@pytest.mark.parametrize("h", [1, 2, 3, 5, 10, 24])
@pytest.mark.parametrize("w", [1, 5, 11, 12, 20, 33, 80])
def test_every_row_fits_at_every_size(app, h, w):
    app.transcript.add("user", "日本語 " * 30)
    app.transcript.stream("assistant", "😀 emoji and text " * 20)
    app.transcript.add("tool", "Write a_very_long_file_name_" * 5, status="running")
    app.input.insert("日本 typed text that goes on and on " * 3)
    for overlay in (None, ListView("Models", ["a / b"] * 30, [1] * 30, on_pick=print)):
        app.overlay = overlay
        rows, cursor = app.frame(h, w)
        assert len(rows) <= max(1, h)
        assert all(cells(t) <= w for t in _texts(rows)) or (h < 3 or w < 12)
        if cursor is not None:
            assert 0 <= cursor[0] < h and 0 <= cursor[1] < w


def _keys(app, text: str) -> None:
    for ch in text:
        app.on_key(Key("text", ch))


def test_app_answers_permission_keys_and_notes_the_answer(app):
    for key, decision in (
        ("y", Decision.ALLOW_ONCE),
        ("a", Decision.ALLOW_ALWAYS),
        ("n", Decision.REJECT_ONCE),
        ("r", Decision.REJECT_ALWAYS),
    ):
        out = _ask_in_thread(app.questions)
        app._watch_permission()
        rows, cursor = app.frame(24, 80)
        assert cursor is None and any("Allow always (a)" in t for t in _texts(rows))
        _keys(app, "x")  # other keys do nothing while a question is open
        assert not out
        _keys(app, key)
        assert _wait(out) == decision and app.shown is None
    notes = [i.text for i in app.transcript.items]
    assert notes == [
        "allowed 'write_file'",
        "always allowed 'write_file'",
        "rejected 'write_file'",
        "always rejected 'write_file'",
    ]
    out = _ask_in_thread(app.questions)
    app._watch_permission()
    app.on_key(Key("key", "down"))
    app.on_key(Key("key", "down"))
    app.on_key(Key("key", "enter"))
    assert _wait(out) == Decision.REJECT_ONCE


def test_app_commands_and_the_input_line(app):
    app.on_key(Key("key", "enter"))
    assert not app.transcript.items  # an empty line is not sent
    _keys(app, ":theme pink")
    app.on_key(Key("key", "enter"))
    assert app.theme == "pink" and "could not save: there is no config file" in app.transcript.items[-1].text
    _keys(app, ":nope")
    app.on_key(Key("key", "enter"))
    assert app.transcript.items[-1].text == ":nope: unknown command  (try :help)"
    app.on_key(Key("paste", ":mo"))
    _keys(app, "dels")
    app.on_key(Key("key", "enter"))
    assert app.overlay is not None and app.overlay.rows == ["local / m  (current)"]
    app.on_key(Key("key", "esc"))
    assert app.overlay is None and app.input.text == ""
    _keys(app, ":q")
    app.on_key(Key("key", "enter"))
    assert app.done and app.exit_code == 0


def test_a_failing_command_is_one_line_in_the_chat(app, monkeypatch):
    def broken(*args):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(app.client, "list_sessions", broken)
    _keys(app, ":sessions")
    app.on_key(Key("key", "enter"))
    last = app.transcript.items[-1]
    assert last.kind == "error" and last.text.startswith("internal error in :sessions: RuntimeError: disk on fire")
    assert not app.done


def test_mcp_viewer_shows_where_each_server_runs_and_what_the_runtime_says(app):
    from openheim.config.schema import McpServerConfig

    _keys(app, ":mcp")
    app.on_key(Key("key", "enter"))
    assert app.overlay.rows == [] and "no MCP servers configured" in app.overlay.empty
    app.on_key(Key("key", "esc"))
    app.client.config.mcp_servers = {
        "files": McpServerConfig("files", command="npx", args=["-y", "--token", "s3cret"]),
        "web": McpServerConfig("web", url="https://user:pw@mcp.example.com/v1?key=s3cret"),
    }
    _keys(app, ":mcp")
    app.on_key(Key("key", "enter"))
    rows = app.overlay.rows
    assert rows[0].startswith("files") and "stdio  npx (3 args)" in rows[0]
    assert rows[1].startswith("web") and "http  https://mcp.example.com/v1" in rows[1]
    assert all("s3cret" not in r and "pw@" not in r for r in rows)
    assert all(" · " not in r for r in rows)  # servers configured after the start: the runtime knows no state
