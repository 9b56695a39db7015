"""Resource bounds driven through `openheim run`: a huge sparse file costs read_file and search neither
memory nor time."""

from __future__ import annotations

import json
import time

import pytest
from cli_helpers import ROOT, openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.mark.parametrize("engine", ["rg", "python"])
def test_a_10_gb_sparse_file_is_not_scanned(isolated_home, tmp_path, engine):
    big = tmp_path / "big.txt"
    with open(big, "wb") as f:
        f.truncate(10 * 1024**3)  # 10 GiB of NUL bytes, all of it a hole: one line with no end
    (tmp_path / "small.txt").write_text("a NEEDLE here\n")
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("read_file", {"path": "big.txt", "offset": 2}, id="r"),
                    ToolCall("search", {"pattern": "NEEDLE"}, id="s"),
                ]
            ),
            Reply(text="done"),
        )
        started = time.monotonic()
        r, peak_kib, cpu = measured(
            "run", "go", cwd=tmp_path, env={"PATH": "/nonexistent"} if engine == "python" else None
        )
        took = time.monotonic() - started
    assert r.returncode == 0, r.stderr
    read, found = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert "does not start within the first 64 MiB" in read
    assert found == "small.txt:1: a NEEDLE here"  # the huge file is skipped, not scanned
    assert took < 20 and peak_kib < 400 * 1024, (took, peak_kib)  # far below 10 GB
    assert cpu < 15, cpu


# Run the command in a fresh parent, so its peak RSS is that command's alone (RUSAGE_CHILDREN of this test
# process would report the largest child any earlier test waited for).
_MEASURE = (
    "import resource, subprocess, sys; r = subprocess.run(sys.argv[1:]); "
    "u = resource.getrusage(resource.RUSAGE_CHILDREN); "
    "sys.stderr.write(f'RUSAGE {u.ru_maxrss} {u.ru_utime + u.ru_stime}\\n'); sys.exit(r.returncode)"
)


def measured(*args: str, cwd, env: dict | None) -> tuple:
    """(the completed `openheim ARGS`, its peak RSS in KiB, its CPU seconds)."""
    import os
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    r = subprocess.run(
        [sys.executable, "-c", _MEASURE, sys.executable, "-m", "openheim", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    lines = r.stderr.splitlines()
    _, peak, cpu = lines[-1].split()
    r.stderr = "\n".join(lines[:-1])
    return r, int(peak), float(cpu)


@pytest.fixture
def tiny_disk(tmp_path):
    """A 1 MiB tmpfs (needs root, else skipped), unmounted afterwards."""
    import os
    import subprocess

    mnt = tmp_path / "disk"
    mnt.mkdir()
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], capture_output=True, check=False
        ).returncode
        != 0
    ):
        pytest.skip("cannot mount a tmpfs here")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


def fill(disk, spare: int) -> None:
    """Fill the disk, leaving ``spare`` bytes free."""
    import os

    (disk / "spare").write_bytes(b"\1" * spare)
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
    try:
        while os.write(fd, b"\1" * 4096):
            pass
    except OSError:
        pass
    finally:
        os.close(fd)
    (disk / "spare").unlink()


def test_a_turn_that_cannot_be_saved_on_a_full_disk_leaves_the_log_as_it_was(tiny_disk, tmp_path):
    home = tiny_disk / "home"
    home.mkdir()
    env = {"OPENHEIM_HOME": str(home)}
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        first = openheim("run", "-o", "json", "one", cwd=tmp_path, env=env)
        assert first.returncode == 0, first.stderr
        sid = json.loads(first.stdout)["session_id"]
        log = next(home.rglob(f"{sid}*.jsonl"))
        before = log.read_bytes()
        fill(tiny_disk, 8192)  # room for the lock and the prompt; not for the long reply
        srv.enqueue(Reply(text="x" * 20000))
        r = openheim("run", "--session", sid, "two", cwd=tmp_path, env=env)
        assert r.returncode != 0 and r.stderr.count("\n") == 1 and "No space left" in r.stderr, r.stderr
        assert log.read_bytes() == before  # no unanswered "two" left behind
        (tiny_disk / "filler").unlink()
        again = openheim("run", "--session", sid, "three", cwd=tmp_path, env=env)
        assert again.returncode == 0, again.stderr
    roles = [(m["role"], m["content"]) for m in srv.requests[-1].body["messages"] if m["role"] != "system"]
    assert roles == [("user", "one"), ("assistant", "echo: one"), ("user", "three")]


def test_a_stream_of_only_keepalive_comments_times_out(isolated_home, tmp_path):
    """timeout_secs counts time without content: the comments-only attempt ends after 1 s and is retried."""
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        config = isolated_home / "config.toml"
        config.write_text(config.read_text().replace("timeout_secs = 5", "timeout_secs = 1"))
        srv.enqueue(
            Reply(raw_sse=[": keepalive\n\n"] * 400, delay=0.1),  # 40 s of comments, no content
            Reply(text="answer"),
        )
        started = time.monotonic()
        r = openheim("run", "hi", cwd=tmp_path)
        took = time.monotonic() - started
    assert r.returncode == 0 and r.stdout == "answer\n", r.stderr
    [warning] = r.stderr.splitlines()
    assert "only keep-alive comments for 1 s (timeout_secs)" in warning and took < 15, took
