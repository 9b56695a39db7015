"""The curses chat end to end: the real `openheim` in a real terminal (tmux) against the fake LLM server.

Each test starts the TUI in a private tmux server, types into it and reads the screen. The last test
reaches it over real SSH (sshd from openssh-server on a loopback port) and drops the connection mid-turn.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from importlib.util import find_spec
from pathlib import Path

import pytest
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall
from tmux_pane import TmuxPane, have_tmux, openheim_command, tui_env

pytestmark = pytest.mark.skipif(not have_tmux() and not os.environ.get("CI"), reason="tmux is not installed")

SLOW = 0.03  # seconds between streamed words: long enough to act mid-stream


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


@pytest.fixture
def work(tmp_path) -> Path:
    path = tmp_path / "work"
    path.mkdir()
    return path


def start(
    tmp_path: Path, home: Path, work: Path, *args: str, width: int = 80, height: int = 24, **env: str
) -> TmuxPane:
    pane = TmuxPane(tmp_path, openheim_command(*args), tui_env(home, **env), width, height, cwd=work)
    pane.wait_for("type a message to start")
    return pane


def footer(pane: TmuxPane) -> str:
    rows = pane.screen().rstrip("\n").split("\n")
    return rows[-1]


def idle(pane: TmuxPane, timeout: float = 15.0) -> str:
    """Wait until no reply runs (the footer's spinner is gone): a finished reply's text shows a moment earlier."""
    pane.wait_for(lambda s: "…" not in s.rstrip("\n").split("\n")[-1], timeout)
    return pane.screen()


def say(pane: TmuxPane, text: str, answer: str, timeout: float = 15.0) -> str:
    """Send a message and wait for the reply to end with ``answer`` on screen."""
    pane.line(text)
    pane.wait_for(answer, timeout)
    return idle(pane, timeout)


def test_chat_streams_resizes_cancels_and_quits(srv, isolated_home, work, tmp_path):
    srv.enqueue(
        Fault(status=503, retry_after=0),  # retried: the warning goes to the log file, not the screen
        Reply(text="Hello 世界 and 😀 " + "word " * 20 + "DONE1", thinking="pondering the question"),
        Reply(text="slow " * 320 + "END", delay=SLOW / 2, usage=(1500, 20)),
        Reply(text="more " * 400, delay=SLOW),
        Reply(text="after the cancel"),
        Fault(status=401),
    )
    with start(tmp_path, isolated_home, work) as pane:
        screen = pane.screen()
        assert "openheim  v0.1.0" in screen and "fake-model  ·  fake" in screen and ":help" in screen
        screen = say(pane, "hi 日本", "DONE1")
        assert "│ hi 日本 │" in screen and "≫ pondering the question" in screen
        assert "Hello 世界 and 😀" in screen
        assert "LLM request failed" not in screen

        pane.line("go slowly")
        pane.wait_for("streaming…")
        for w, h in ((40, 10), (20, 5), (13, 4), (100, 30), (80, 24)):
            pane.resize(w, h)
            time.sleep(0.15)
            assert all(len(row) <= w for row in pane.rows())
        pane.wait_for("END", timeout=30)
        idle(pane)
        assert footer(pane).endswith("fake · fake-model · 1.5k ctx")  # the context the last call reported

        pane.keys("PageUp")
        pane.wait_for(lambda s: "% ↑" in s)
        pane.keys("PageDown", "PageDown", "PageDown", "PageDown")
        pane.wait_for(lambda s: "% ↑" not in s)

        pane.line("and again")
        pane.wait_for("streaming…")
        pane.keys("C-c")
        pane.wait_for("cancelled")
        idle(pane)
        say(pane, "one more", "after the cancel")
        screen = say(pane, "this one fails", "error:")
        assert "check the provider's API key" in " ".join(screen.split())  # however the line wrapped

        pane.keys("C-c")  # idle: quits
        assert pane.exit_status() == 0
    log = (isolated_home / "openheim.log").read_text()
    assert "LLM request failed" in log and "SECRET" not in log
    history = list((isolated_home / "history").glob("*.jsonl"))
    assert len(history) == 1 and "after the cancel" in history[0].read_text()


def test_permission_prompt_allow_and_reject(srv, isolated_home, work, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "alpha\n"})]),
        Reply(text="wrote a"),
        Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "beta\n"})]),
        Reply(text="could not write b"),
    )
    with start(tmp_path, isolated_home, work) as pane:
        pane.line("write a")
        screen = pane.wait_for("Reject always (r)")
        assert "─── permission" in screen and "Write a.txt" in screen and "+alpha" in screen
        assert "waiting for permission" in screen
        pane.keys("y")
        pane.wait_for("wrote a")
        screen = idle(pane)
        assert "allowed 'write_file'" in screen and "→ Successfully wrote" in screen
        assert (work / "a.txt").read_text() == "alpha\n"

        pane.line("write b")
        pane.wait_for("Write b.txt")
        pane.wait_for("Reject always (r)")
        pane.keys("n")
        pane.wait_for("could not write b")
        screen = idle(pane)
        assert "rejected 'write_file'" in screen and "✗ Permission denied by user." in screen
        assert not (work / "b.txt").exists()
        assert srv.requests[-1].body["messages"][-1]["content"] == "Permission denied by user."
        pane.line(":q")
        assert pane.exit_status() == 0


def test_commands(srv, isolated_home, work, tmp_path):
    from openheim.memory.long_term import LongTermMemory

    LongTermMemory(isolated_home / "memory.db").remember("the cat is called Tom")
    (isolated_home / "skills").mkdir()
    (isolated_home / "skills" / "poet.md").write_text("---\ndescription: writes verse\n---\nRhyme.\n")
    srv.enqueue(Reply(text="first", usage=(120, 30, 50)), Reply(text="cut", finish="length", usage=(80, 5)))
    with start(tmp_path, isolated_home, work, "--skills", "poet") as pane:
        assert "skills: poet" in pane.screen()
        pane.line(":help")
        pane.wait_for(":memory QUERY")
        pane.line(":models")
        pane.wait_for("─── Models")
        assert "› fake / fake-model  (current)" in pane.screen()
        pane.keys("Down", "Enter")
        pane.wait_for("switched to fake / other-model")
        assert footer(pane).rstrip().endswith("fake · other-model")
        say(pane, "hello", "first")
        assert srv.requests[-1].body["model"] == "other-model"
        pane.line(":models nope")
        pane.wait_for("unknown model: Model 'nope' not found")
        pane.line(":models fake-model")
        pane.wait_for("switched to fake / fake-model")
        say(pane, "long answer please", "cut off at the output token limit")

        pane.line(":cost")
        screen = pane.wait_for("2 model call(s)")
        assert re.search(r"input\s+200 tokens", screen) and re.search(r"output\s+35 tokens", screen)
        assert re.search(r"cached\s+50 tokens read", screen)

        pane.line(":memory cat")
        pane.wait_for("the cat is called Tom")

        pane.line(":theme pink")
        pane.wait_for("theme set to pink")
        assert 'theme_color = "pink"' in (isolated_home / "config.toml").read_text()
        assert "\x1b[38;5;9m" in pane.screen(colours=True) or "\x1b[91m" in pane.screen(colours=True)
        pane.line(":theme mauve")
        pane.wait_for(":mauve: unknown theme  (available: white, gray")

        pane.line(":config")
        screen = pane.wait_for("─── Config")
        assert re.search(r"Timeout\s+5s", screen) and "fake  (default): fake-model" in screen
        pane.keys("Escape")
        pane.line(":skills")
        pane.wait_for("writes verse")
        pane.keys("Escape")
        pane.line(":mcp")
        pane.wait_for("no MCP servers configured")
        pane.keys("Escape")
        pane.line(":bogus")
        pane.wait_for(":bogus: unknown command  (try :help)")
        pane.line(":quit")
        assert pane.exit_status() == 0


def test_sessions_reopen_with_replay(srv, isolated_home, work, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="the first answer"), Reply(text="the second answer")
    )
    with start(tmp_path, isolated_home, work) as pane:
        say(pane, "first topic", "the first answer")
        pane.line(":new")
        pane.wait_for("─── new session")
        say(pane, "second topic", "the second answer")
        pane.line(":sessions")
        screen = pane.wait_for("─── Sessions")
        rows = [r for r in screen.splitlines() if "topic" in r]
        assert "second topic" in rows[0] and "first topic" in rows[1]
        pane.keys("Down", "Enter")
        screen = pane.wait_for("session restored")
        assert "─── first topic" in screen and "│ first topic │" in screen
        assert "⚙ List" in screen and "the first answer" in screen and "second topic" not in screen
        say(pane, "continue", "echo: continue")
        assert [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "user"] == [
            "first topic",
            "continue",
        ]
        pane.line(":q")
        assert pane.exit_status() == 0


def test_quit_leaves_the_shell_usable(srv, isolated_home, work, tmp_path):
    with TmuxPane(tmp_path, "bash --norc --noprofile", tui_env(isolated_home), cwd=work) as pane:
        pane.line("PS1='$ '; stty -g > before.txt")
        pane.line(openheim_command("--skills", "nope") + "; echo EXIT=$?")
        screen = pane.wait_for("EXIT=2")
        assert "Error: unknown skill 'nope' (available: none;" in screen
        pane.line(openheim_command())
        pane.wait_for("type a message to start")
        say(pane, "quick", "echo: quick")
        pane.line(":q")
        pane.wait_for(lambda s: s.rstrip().endswith("$"))
        pane.line("stty -g > after.txt; echo typed-back")
        pane.wait_for("\ntyped-back")  # echoed as typed, then printed: the line discipline is back
    assert (work / "after.txt").read_text() == (work / "before.txt").read_text()


def test_terminal_types_locale_and_no_color(srv, isolated_home, work, tmp_path):
    for term in ("xterm", "screen", "tmux-256color", "no-such-terminal"):
        with start(tmp_path, isolated_home, work, TERM=term, LANG="", LC_ALL="C") as pane:
            pane.type("日本 😀 ok")
            screen = pane.wait_for("日本 😀 ok")
            assert "fake · fake-model" in screen, term
            if term == "tmux-256color":
                assert "\x1b[" in pane.screen(colours=True)
            pane.keys("C-c")
            assert pane.exit_status() == 0, term
    with start(tmp_path, isolated_home, work, NO_COLOR="1") as pane:
        assert not re.search(r"\x1b\[(3[0-7]|9[0-7]|38;)", pane.screen(colours=True))
        pane.keys("C-c")
        assert pane.exit_status() == 0


def test_a_crash_restores_the_terminal_before_the_traceback(srv, isolated_home, work, tmp_path):
    script = tmp_path / "crash.py"
    script.write_text(
        "import sys\nfrom openheim.client import OpenheimClient\nfrom openheim.tui import app, run_tui\n"
        "def boom(self):\n    raise RuntimeError('drawing went wrong')\n"
        "app.App.draw = boom\n"
        "sys.exit(run_tui(OpenheimClient.builder().build(), [], '0'))\n"
    )
    with TmuxPane(tmp_path, "bash --norc --noprofile", tui_env(isolated_home), cwd=work) as pane:
        pane.line("PS1='$ '; stty -g > before.txt")
        pane.line(f"{sys.executable} {script}; echo EXIT=$?")
        screen = pane.wait_for("EXIT=1")
        assert "RuntimeError: drawing went wrong" in screen and "Traceback" in screen
        pane.line("stty -g > after.txt; echo typed-back")
        pane.wait_for("\ntyped-back")
    assert (work / "after.txt").read_text() == (work / "before.txt").read_text()


@pytest.mark.slow
@pytest.mark.timeout(600)  # may wait for the frozen build (shared with test_frozen.py)
@pytest.mark.skipif(find_spec("PyInstaller") is None, reason="PyInstaller is not installed")
def test_frozen_binary_with_an_empty_locale(srv, isolated_home, work, tmp_path, frozen_bin):
    env = {
        "TERM": "xterm-256color",
        "OPENHEIM_HOME": str(isolated_home),
        "HOME": str(isolated_home.parent),
        "PATH": "/usr/bin:/bin",
    }  # no LANG or LC_*: the binary must pick a UTF-8 locale itself
    with TmuxPane(tmp_path, f"env -i {' '.join(f'{k}={v}' for k, v in env.items())} {frozen_bin}", cwd=work) as pane:
        pane.wait_for("type a message to start", timeout=30)
        srv.enqueue(Reply(text="slow " * 300, delay=SLOW))
        pane.line("stream")
        pane.wait_for("streaming…")
        pane.keys("C-c")  # one key press, one cancel (the bootloader forwards signals: no second one)
        pane.wait_for("cancelled")
        idle(pane)
        say(pane, "日本 ok", "echo: 日本 ok")
        assert "│ 日本 ok │" in pane.screen()
        pane.keys("C-c")
        assert pane.exit_status() == 0


def test_without_a_terminal_it_points_to_run(srv, isolated_home, work):
    from cli_helpers import openheim

    r = openheim(cwd=work)
    assert r.returncode == 2 and "openheim run" in r.stderr and len(r.stderr.strip().splitlines()) == 1


# --- over SSH -----------------------------------------------------------------------------------------

SSHD = "/usr/sbin/sshd"


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def sshd(tmp_path):
    """A throwaway sshd on a free loopback port: its own host key, one authorized key, no PAM."""
    if not Path(SSHD).exists() or not have_tmux():
        if os.environ.get("CI"):
            pytest.fail("sshd (openssh-server) and tmux must be installed for CI; .ci/run installs them")
        pytest.skip("sshd or tmux is not installed")
    d = tmp_path / "ssh"
    d.mkdir()
    for name in ("host_key", "client_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client_key.pub").read_text())
    port = _free_port()
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d / 'host_key'}\nAuthorizedKeysFile {d / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
        "PermitRootLogin prohibit-password\nPidFile none\nPrintMotd no\n"
    )
    if os.geteuid() == 0:
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation directory
    proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 10
    while subprocess.run(["ssh-keyscan", "-p", str(port), "127.0.0.1"], capture_output=True).returncode != 0:
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"sshd did not start: {proc.stderr.read().decode(errors='replace')}")
        time.sleep(0.1)
    yield port, d / "client_key"
    proc.terminate()
    proc.wait(5)


def _openheim_pids(marker: str) -> list[int]:
    """Python processes running ``-m openheim`` with ``marker`` among their arguments."""
    pids = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue
            if argv[1:3] == ["-m", "openheim"] and marker in argv:
                pids.append(int(entry.name))
    return pids


def test_over_ssh_a_dropped_connection_saves_the_session_and_leaves_nothing_running(
    srv, isolated_home, work, tmp_path, sshd
):
    import getpass
    import shlex

    port, key = sshd
    config = str(isolated_home / "config.toml")
    srv.enqueue(Reply(text="over ssh it streams"), Reply(text="slow " * 1000, delay=SLOW))
    env = tui_env(isolated_home)
    env.pop("LANG")  # the remote side starts with sshd's bare environment: the TUI picks a UTF-8 locale itself
    remote = (
        f"cd {shlex.quote(str(work))} && exec env "
        + " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        + " "
        + openheim_command("--config", config)
    )
    ssh = [
        "ssh",
        "-tt",
        "-i",
        str(key),
        "-p",
        str(port),
        "-o",
        "StrictHostKeyChecking=no",
        "-o",
        "UserKnownHostsFile=/dev/null",
        "-o",
        "BatchMode=yes",
        "-o",
        "LogLevel=ERROR",
        f"{getpass.getuser()}@127.0.0.1",
        remote,
    ]
    with TmuxPane(tmp_path, " ".join(shlex.quote(a) for a in ssh), {"TERM": "xterm-256color"}) as pane:
        pane.wait_for("type a message to start", timeout=30)
        say(pane, "hello 世界", "over ssh it streams")
        assert "│ hello 世界 │" in pane.screen()
        pane.line("now stream slowly")
        pane.wait_for("streaming…")
        assert _openheim_pids(config), "the TUI should be running behind sshd"
        os.kill(pane.pane_pid(), 9)  # the SSH client dies: sshd hangs up the TUI's terminal
        deadline = time.monotonic() + 15
        while _openheim_pids(config) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _openheim_pids(config), "an openheim process outlived the dropped connection"
    logs = list((isolated_home / "history").glob("*.jsonl"))
    assert len(logs) == 1
    messages = [json.loads(line) for line in logs[0].read_text().splitlines()]
    users = [m["content"][0]["text"] for m in messages if m["role"] == "user"]
    assert users == ["hello 世界", "now stream slowly"]
    cut = messages[-1]  # what had streamed when the connection dropped is kept, marked as interrupted
    assert cut["role"] == "assistant" and cut["content"][0]["text"].startswith("slow")
    assert cut["content"][1]["text"].startswith("\n\n[Reply interrupted: stopped by the user.")
    meta = json.loads(logs[0].with_suffix(".json").read_text())["meta"]
    assert meta["title"] == "hello 世界"
    assert "signal 1" in (isolated_home / "openheim.log").read_text()


def test_cost_counts_the_subagents_calls(srv, isolated_home, work, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("delegate_task", {"system_prompt": "You help.", "task": "t"})], usage=(100, 10)),
        Reply(text="sub answer", usage=(1000, 50)),
        Reply(text="all done", usage=(200, 20)),
    )
    with start(tmp_path, isolated_home, work) as pane:
        pane.line("delegate it")
        pane.wait_for("Reject always (r)")
        pane.keys("y")
        pane.wait_for("all done")
        idle(pane)
        pane.line(":cost")
        screen = pane.wait_for("3 model call(s)")
        assert re.search(r"input\s+1,?300 tokens", screen) and re.search(r"output\s+80 tokens", screen)
