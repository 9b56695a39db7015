"""`openheim … | head`: a reader that goes away early ends the program quietly (no message, no traceback) with
exit code 141, the documented code, whichever command was writing."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest
from cli_helpers import ROOT, openheim, write_config
from fake_llm import FakeLLMServer, Reply

BROKEN_PIPE = 141


def piped(command: str, cwd, lines: int = 2, env: dict | None = None) -> tuple[str, str, int]:
    """Run ``command | head -N`` in bash: (what head printed, the command's stderr, its exit status)."""
    err = cwd / "stderr.txt"
    script = f'{command} 2>{shlex.quote(str(err))} | head -{lines}; echo "status=${{PIPESTATUS[0]}}"'
    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=cwd, env=full_env, timeout=60)
    out, _, status = r.stdout.rpartition("status=")
    return out, err.read_text(), int(status)


def openheim_cmd(*args: str) -> str:
    return " ".join(shlex.quote(a) for a in (sys.executable, "-m", "openheim", *args))


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


@pytest.mark.parametrize("output", ["text", "stream-json"])
def test_run_into_head_ends_quietly(srv, tmp_path, isolated_home, output):
    srv.enqueue(Reply(text="".join(f"line {n}\n" for n in range(400)), chunk_size=7, delay=0.005))
    out, err, status = piped(openheim_cmd("run", "-o", output, "count"), tmp_path)
    assert len(out.splitlines()) == 2
    assert err == "" and status == BROKEN_PIPE
    (log,) = (isolated_home / "history").glob("*.jsonl")  # the session was saved on the way out
    assert "count" in log.read_text()


GONE = [
    ("doctor",),
    ("doctor", "--json"),
    ("sessions", "list"),
    ("sessions", "list", "--json"),
    ("permissions", "explain", "read_file", "{}"),
    ("mcp", "status"),
    ("run", "hi"),
    ("run", "-o", "json", "hi"),
    ("--version",),
    ("init", "--force"),
]


@pytest.mark.parametrize("args", GONE, ids=[" ".join(a) for a in GONE])
def test_every_command_ends_quietly_when_its_reader_is_gone(srv, tmp_path, args):
    """The reader is gone before the first write (``(sleep; cmd) | true``): every write fails, deterministically."""
    if args[0] == "sessions":
        assert openheim("run", "hi", cwd=tmp_path).returncode == 0  # a session to list
    err = tmp_path / "stderr.txt"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    script = (
        f"(sleep 0.3; {openheim_cmd(*args)} </dev/null) 2>{shlex.quote(str(err))} | true; "
        'echo "status=${PIPESTATUS[0]}"'
    )
    r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert err.read_text() == ""
    assert r.stdout.strip() == f"status={BROKEN_PIPE}"


def test_doctor_into_head(srv, tmp_path):
    out, err, status = piped(openheim_cmd("doctor"), tmp_path, lines=1)
    assert len(out.splitlines()) == 1 and err == "" and status in (0, BROKEN_PIPE)
