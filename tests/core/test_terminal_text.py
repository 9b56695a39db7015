"""The one terminal-text filter: file names, model text and server answers reach the terminal with their
control characters made visible (no OSC 52 clipboard write, no carriage-return overwrite above undo's
[y/N]); a scan finds every print in openheim/commands and checks it goes through the filter."""

from __future__ import annotations

import ast
import json
import os
import pty
import subprocess
import sys
from pathlib import Path

from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.core.control_chars import visible

PACKAGE = Path(__file__).resolve().parents[2] / "openheim"
HOSTILE = "x\x1b]52;c;aGVsbG8=\x07\rOK.txt"  # OSC 52 (set the clipboard), then CR to overwrite the line


def test_undo_and_sessions_show_make_control_characters_visible(isolated_home, tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(
            Reply(tool_calls=[ToolCall("write_file", {"path": HOSTILE, "content": "hi\n"}, id="w")]),
            Reply(text="made it"),
        )
        run = openheim("run", "-o", "json", "make the file", cwd=root)
    assert run.returncode == 0, run.stderr
    assert (root / HOSTILE).exists()
    session = json.loads(run.stdout)["session_id"]
    shown = openheim("sessions", "show", session, "--changes")
    undo = openheim("undo", "--yes", cwd=root)
    transcript = openheim("sessions", "show", session)
    for result in (shown, undo, transcript):
        assert result.returncode == 0, result.stderr
        assert "\x1b" not in result.stdout + result.stderr and "\x07" not in result.stdout + result.stderr
        assert "\r" not in result.stdout + result.stderr
    assert "A x\\x1b]52;c;aGVsbG8=\\a\\rOK.txt" in shown.stdout
    assert "remove x\\x1b]52;c;aGVsbG8=\\a\\rOK.txt (the turn created it)" in undo.stdout
    assert not (root / HOSTILE).exists()


def test_visible_escapes_every_control_but_newline_and_tab():
    assert visible("a\x1b[2Jb\x9bc\x7fd\re\tf\ng") == "a\\x1b[2Jb\\x9bc\\x7fd\\re\tf\ng"
    assert visible("a\tb\nc", one_line=True) == "a\\x09b\\x0ac"


# --- every print in openheim/commands -----------------------------------------------------------------

PRINTS = {"click.echo", "click.secho", "print", "sys.stdout.write", "sys.stderr.write"}
# Call sites (module, function) that print only our own words or JSON (json.dumps escapes every C0 control).
TRUSTED = {
    ("commands/sessions.py", "compact_session"): "counts and the id the user typed",
    ("commands/sessions.py", "delete_session"): "the resolved session id (validated: [A-Za-z0-9_-])",
    ("commands/memory.py", "add_cmd"): "a memory number",
    ("commands/memory.py", "edit_cmd"): "a memory number",
    ("commands/memory.py", "forget_cmd"): "a memory number",
}
JSON = ("json.dumps", "_dumps", "redact")  # machine output: json.dumps escapes every C0 control character


def _prints(tree: ast.AST):
    """(function name, call) for each print call, with the name of the function it is in."""
    for func in ast.walk(tree):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, ast.Call) and ast.unparse(node.func) in PRINTS:
                    yield func.name, node


def _filtered(arg: ast.expr) -> bool:
    """A constant, an f-string of constants only, JSON, or a call of the filter."""
    if isinstance(arg, ast.Constant):
        return True
    if isinstance(arg, ast.JoinedStr):
        return all(isinstance(v, ast.Constant) for v in arg.values)
    if isinstance(arg, ast.Call) and ast.unparse(arg.func) in JSON:
        inner = arg.args[0] if arg.args else None
        return ast.unparse(arg.func) != "redact" or (isinstance(inner, ast.Call) and _filtered(inner))
    return isinstance(arg, ast.Call) and ast.unparse(arg.func) in ("visible", "control_chars.visible")


def test_every_print_of_the_commands_goes_through_the_filter():
    unfiltered = []
    for path in sorted((PACKAGE / "commands").glob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for name, call in _prints(ast.parse(path.read_text(encoding="utf-8"))):
            if (rel, name) in TRUSTED or not call.args:
                continue
            if not _filtered(call.args[0]):
                unfiltered.append(f"{rel}:{call.lineno} in {name}: {ast.unparse(call)[:100]}")
    assert not unfiltered, "pass untrusted text through openheim.core.control_chars.visible:\n" + "\n".join(unfiltered)


def test_run_on_a_terminal_shows_the_models_control_characters_escaped(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(text="before\x1b]52;c;aGk=\x07after\n"))
        leader, follower = pty.openpty()
        proc = subprocess.Popen(
            [sys.executable, "-m", "openheim", "run", "hi"],
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)},
        )
        os.close(follower)
        out = b""
        while True:
            try:
                chunk = os.read(leader, 4096)
            except OSError:
                break
            if not chunk:
                break
            out += chunk
        proc.wait(timeout=60)
        os.close(leader)
    assert proc.returncode == 0, proc.stderr.read() if proc.stderr else ""
    assert b"\x1b" not in out and b"\x07" not in out
    assert b"before\\x1b]52;c;aGk=\\aafter" in out
