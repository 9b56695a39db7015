"""execute_command: process groups, timeouts, caps, early-closed pipes, secrets and cancellation."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

import pytest

from openheim.core.turn_context import TurnContext
from openheim.errors import ParseError, ToolExecutionError
from openheim.tools import process
from openheim.tools.execute_command import ExecuteCommandTool


@pytest.fixture
def ctx(tmp_path: Path) -> TurnContext:
    return TurnContext(work_dir=tmp_path, cwd=tmp_path)


def run(ctx: TurnContext, command: str, timeout: float = 10.0) -> str:
    return ExecuteCommandTool(timeout=timeout).execute({"command": command}, ctx)


def alive(pid: int) -> bool:
    """True while the pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (FileNotFoundError, ProcessLookupError):
        return False


def wait_gone(pids: list[int], within: float = 3.0) -> list[int]:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.02)
    return [p for p in pids if alive(p)]


def read_pids(path: Path) -> list[int]:
    return [int(x) for x in path.read_text().split()]


def test_stdout_then_stderr_on_success(ctx):
    assert run(ctx, "echo out; echo warn >&2") == "out\n[stderr]\nwarn\n"
    assert run(ctx, "printf out; printf warn >&2") == "out\n[stderr]\nwarn"
    assert run(ctx, "echo warn >&2") == "[stderr]\nwarn\n"
    assert run(ctx, "echo only") == "only\n"
    assert run(ctx, "true") == ""


def test_runs_in_the_session_cwd_with_stdin_closed(tmp_path):
    (tmp_path / "sub").mkdir()
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path / "sub")
    assert run(ctx, "pwd").strip() == str(tmp_path / "sub")
    assert run(ctx, "cat; echo after") == "after\n"


def test_failure_reports_both_streams(ctx):
    with pytest.raises(ToolExecutionError) as info:
        run(ctx, "echo some; echo bad >&2; exit 3")
    assert info.value.message == "Command failed:\nStdout: some\n\nStderr: bad\n"


@pytest.mark.parametrize(
    "command,name",
    [
        ("echo some; kill -TERM $$", "SIGTERM"),
        ("echo some; kill -KILL $$", "SIGKILL"),
        ("echo some; exec sh -c 'kill -SEGV $$'", "SIGSEGV"),
    ],
)
def test_a_command_killed_by_a_signal_names_it(ctx, command, name):
    with pytest.raises(ToolExecutionError) as info:
        run(ctx, command)
    assert info.value.message == f"Command killed by signal {name}:\nStdout: some\n\nStderr: "


def test_timeout_kills_grandchildren_and_keeps_partial_output(ctx, tmp_path):
    pids = tmp_path / "pids"
    command = (
        f"(sleep 30 & echo $! >> {pids}; sleep 30) & echo $! >> {pids}; "
        f"sh -c 'sleep 30 & echo $! >> {pids}; wait' & echo partial; sleep 30"
    )
    start = time.monotonic()
    with pytest.raises(ToolExecutionError) as info:
        run(ctx, command, timeout=0.5)
    assert time.monotonic() - start < 5
    assert info.value.message.startswith("Command timed out after 0.5 seconds and was killed.\nStdout: partial\n")
    assert len(read_pids(pids)) == 3
    assert wait_gone(read_pids(pids)) == []
    assert process.running_groups() == []


def test_ten_megabytes_of_output_are_capped(ctx):
    out = run(ctx, "head -c 10000000 /dev/zero | tr '\\0' a; head -c 10000000 /dev/zero | tr '\\0' b >&2")
    stdout, stderr = out.split("[stderr]\n")
    assert stdout == "a" * 65536 + "\n[output truncated at 65536 bytes]\n"
    assert stderr == "b" * 65536 + "\n[output truncated at 65536 bytes]\n"


def test_closing_stdout_early_does_not_hang(ctx):
    start = time.monotonic()
    assert run(ctx, "exec >&-; sleep 0.2; echo done >&2") == "[stderr]\ndone\n"
    assert run(ctx, "exec >&- 2>&-; sleep 0.2; exit 0") == ""
    assert time.monotonic() - start < 3


def test_background_child_holding_the_pipe_does_not_hang(ctx, tmp_path):
    pids = tmp_path / "pids"
    start = time.monotonic()
    assert run(ctx, f"sleep 30 & echo $! > {pids}; echo bg") == "bg\n"
    assert time.monotonic() - start < 3
    assert wait_gone(read_pids(pids)) == []


def test_secrets_are_not_in_the_child_environment(ctx, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-value")
    monkeypatch.setenv("MY_PROVIDER_KEY", "another-secret")
    monkeypatch.setenv("HARMLESS_SETTING", "visible")
    ctx.secret_env_vars = frozenset({"OPENAI_API_KEY", "MY_PROVIDER_KEY"})
    out = run(ctx, "env")
    assert "sk-secret-value" not in out and "another-secret" not in out
    assert "HARMLESS_SETTING=visible" in out


@pytest.mark.parametrize("orig,expected", [("/usr/lib/orig", "/usr/lib/orig"), (None, None)])
def test_frozen_binary_library_path_is_restored(monkeypatch, orig, expected):
    monkeypatch.setattr(sys, "frozen", True, raising=False)
    base = {"LD_LIBRARY_PATH": "/tmp/_MEI123", "PATH": "/bin"}
    if orig is not None:
        base["LD_LIBRARY_PATH_ORIG"] = orig
    env = process.child_env(["NOPE"], base)
    assert env.get("LD_LIBRARY_PATH") == expected
    assert env["PATH"] == "/bin"


def test_not_frozen_keeps_library_path(monkeypatch):
    monkeypatch.delattr(sys, "frozen", raising=False)
    assert process.child_env([], {"LD_LIBRARY_PATH": "/x"}) == {"LD_LIBRARY_PATH": "/x"}


def test_cancel_kills_the_whole_group(ctx, tmp_path):
    pids = tmp_path / "pids"
    result: dict[str, object] = {}

    def worker() -> None:
        try:
            result["ok"] = run(ctx, f"sleep 30 & echo $! > {pids}; echo $$ >> {pids}; sleep 30", timeout=30)
        except ToolExecutionError as e:
            result["err"] = e.message

    thread = threading.Thread(target=worker)
    start = time.monotonic()
    thread.start()
    deadline = time.monotonic() + 5
    while (not pids.exists() or len(pids.read_text().split()) < 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    ctx.cancel.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert result == {"err": "Command cancelled."}
    assert time.monotonic() - start < 5
    assert wait_gone(read_pids(pids)) == []


def test_already_cancelled_runs_nothing(ctx, tmp_path):
    ctx.cancel.cancel()
    with pytest.raises(ToolExecutionError, match="Command cancelled."):
        run(ctx, f"touch {tmp_path / 'ran'}")
    assert not (tmp_path / "ran").exists()


def test_kill_all_stops_running_commands(ctx):
    result: dict[str, str] = {}

    def worker() -> None:
        try:
            run(ctx, "sleep 30", timeout=30)
        except ToolExecutionError as e:
            result["err"] = e.message

    thread = threading.Thread(target=worker)
    thread.start()
    deadline = time.monotonic() + 5
    while not process.running_groups() and time.monotonic() < deadline:
        time.sleep(0.01)
    process.kill_all()
    thread.join(5)
    assert result["err"].startswith("Command killed by signal SIGKILL:")


def test_spawn_failure(tmp_path):
    ctx = TurnContext(work_dir=tmp_path, cwd=tmp_path / "gone")
    with pytest.raises(ToolExecutionError, match="Failed to execute command: "):
        run(ctx, "true")


def test_blank_command_is_refused(ctx):
    with pytest.raises(ParseError, match="expected non-empty text"):
        ExecuteCommandTool().execute({"command": "   "}, ctx)


def test_capabilities_use_exact_arguments():
    caps = ExecuteCommandTool.capabilities
    assert (caps.read_only, caps.kind, caps.approval_scope) == (False, "execute", "exact_arguments")


def test_invalid_utf8_output_is_decoded_lossily(ctx):
    assert run(ctx, "printf 'a\\377b'") == "a\ufffdb"


def test_no_descriptor_leak(ctx):
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(5):
        run(ctx, "echo x; echo y >&2")
    assert len(os.listdir("/proc/self/fd")) == before


def test_without_pidfd_the_polling_path_behaves_the_same(ctx, tmp_path, monkeypatch):
    monkeypatch.setattr("openheim.tools.execute_command._pidfd", lambda pid: None)
    pids = tmp_path / "pids"
    assert run(ctx, f"sleep 30 & echo $! > {pids}; echo bg; echo e >&2") == "bg\n[stderr]\ne\n"
    assert wait_gone(read_pids(pids)) == []
    assert run(ctx, "exec >&-; sleep 0.1; echo done >&2") == "[stderr]\ndone\n"
    with pytest.raises(ToolExecutionError, match="timed out after 0.3 seconds"):
        run(ctx, "sleep 30", timeout=0.3)


def test_frozen_binary_bootloader_variables_are_dropped(monkeypatch):
    from openheim.tools.process import child_env

    monkeypatch.setattr(sys, "frozen", True, raising=False)
    base = {
        "PATH": "/usr/bin",
        "_PYI_APPLICATION_HOME_DIR": "/tmp/_MEIabc",
        "_PYI_ARCHIVE_FILE": "/x",
        "_PYI_PARENT_PROCESS_LEVEL": "1",
        "LD_LIBRARY_PATH": "/tmp/_MEIabc",
    }
    assert child_env((), base) == {"PATH": "/usr/bin"}
