"""Shared by the sandbox attack tests: run the model's commands through `openheim run` (a fake model asks for
them), or one command straight through `openheim sandbox exec`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from cli_helpers import ROOT, openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


def configure(home: Path, srv: FakeLLMServer, sandbox: str = "", extra: str = "") -> None:
    write_config(
        home, srv.base_url, extra=f"allow_shell = true\nmax_parallel_tools = 4\n{extra}\n[sandbox]\n{sandbox}\n"
    )


def run_commands(
    srv: FakeLLMServer, work: Path, commands: list[str], *args: str, env: dict | None = None
) -> tuple[list[str], subprocess.CompletedProcess]:
    """Let the model ask for ``commands`` (one turn); their tool results, in order, and the finished run."""
    srv.enqueue(
        Reply(tool_calls=[ToolCall("execute_command", {"command": c}, id=f"c{i}") for i, c in enumerate(commands)]),
        Reply(text="done"),
    )
    done = openheim("run", "go", "--cwd", str(work), *args, cwd=work, env=env)
    assert done.returncode == 0, done.stderr
    results = {m["tool_call_id"]: m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool"}
    return [results[f"c{i}"] for i in range(len(commands))], done


def sandbox_exec(work: Path, command: str, *options: str, **kwargs) -> subprocess.CompletedProcess:
    """``openheim sandbox exec --write WORK OPTIONS -- sh -c COMMAND`` in ``work`` (kwargs go to subprocess.run)."""
    argv = [sys.executable, "-m", "openheim", "sandbox", "exec", "--write", str(work), *options, "--", "sh", "-c"]
    env = {**os.environ, "PYTHONPATH": str(ROOT), **kwargs.pop("env", {})}
    kwargs.setdefault("capture_output", True)
    return subprocess.run([*argv, command], cwd=work, env=env, text=True, timeout=60, **kwargs)
