"""A hook cannot hold a turn past its timeout, nor make openheim hold its output in memory.

Through `openheim run` against the fake provider: a hook that leaves a `setsid` child holding its stdout, a
`sleep infinity` daemon, a hook that never ends, and one that prints 400 MB."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

import pytest
from cli_helpers import ROOT, fake_provider, openheim
from fake_llm import Reply, ToolCall

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux /proc")


def hook_toml(command: str, timeout: float) -> str:
    return f'[[hooks]]\nevent = "pre_tool"\ncommand = {json.dumps(command)}\ntimeout_secs = {timeout}\n'


def leftovers(tag: str) -> list[str]:
    out = subprocess.run(["pgrep", "-af", tag], capture_output=True, text=True).stdout
    return [line for line in out.splitlines() if "pgrep" not in line]


def read_call() -> Reply:
    return Reply(tool_calls=[ToolCall("list_dir", {"path": "."}, id="r1")])


def run_timed(isolated_home, tmp_path, command: str, timeout: float) -> tuple[float, list[str], str]:
    with fake_provider("openai", isolated_home, extra=hook_toml(command, timeout)) as srv:
        srv.enqueue(read_call(), Reply(text="done"))
        started = time.monotonic()
        r = openheim("run", "--approve", "all", "go", cwd=tmp_path, timeout=60)
        took = time.monotonic() - started
        assert r.returncode == 0, r.stderr
        got = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    return took, got, r.stderr


def test_a_setsid_child_holding_stdout_does_not_outlive_the_timeout(isolated_home, tmp_path):
    tag = f"{25 + uuid.uuid4().int % 1000 / 1000:.3f}"
    took, got, stderr = run_timed(isolated_home, tmp_path, f"setsid sleep {tag} & sleep 40", 2)
    assert took < 12, took  # ~2 s of timeout plus start-up; before: until `sleep 25` ended
    assert "timed out after 2s" in stderr and got[0].startswith("Refused: the pre_tool hook")
    time.sleep(0.3)
    assert leftovers(f"sleep {tag}") == []  # the setsid'd child was killed with the tree


def test_a_daemon_left_behind_holding_the_pipes_does_not_hang_the_turn(isolated_home, tmp_path):
    tag = f"infinity{uuid.uuid4().hex[:6]}"
    daemon = f"exec -a sleep-{tag} sleep infinity"
    took, got, _ = run_timed(isolated_home, tmp_path, f"setsid bash -c '{daemon}' & echo '{{}}'", 20)
    assert took < 12, took  # before: the turn never ended
    assert not got[0].startswith("Refused"), got[0]  # the hook answered, and exited 0
    time.sleep(0.3)
    assert leftovers(f"sleep-{tag}") == []


def test_a_hook_printing_400_mb_stays_bounded(isolated_home, tmp_path):
    command = "head -c 400000000 /dev/zero | tr '\\0' a"
    with fake_provider("openai", isolated_home, extra=hook_toml(command, 60)) as srv:
        srv.enqueue(read_call(), Reply(text="done"))
        probe = (
            "import resource, subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'openheim', 'run', '--approve', 'all', 'go'],"
            " capture_output=True, stdin=subprocess.DEVNULL)\n"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        out = subprocess.run(
            [sys.executable, "-c", probe], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120
        )
        code, rss_kib = map(int, out.stdout.split())
        assert code == 0, out.stderr
        got = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert not got[0].startswith("Refused"), got[0]
    assert rss_kib < 250 * 1024, rss_kib  # before: 799 MB
