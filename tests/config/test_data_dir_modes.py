"""The data dir is private whatever the umask: `openheim run` under umask 022 leaves every directory in it
0700 and every file 0600 (checkpoint copies of a 0600 file included); an existing loose one is repaired
with one line, and doctor names it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def loose_entries(top: Path) -> list[str]:
    """Every entry under ``top`` (itself included) that group or others can read, write or enter."""
    found = []
    for path in [top, *top.rglob("*")]:
        info = path.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        if stat.S_IMODE(info.st_mode) & 0o077:
            found.append(f"{path.relative_to(top)} {stat.S_IMODE(info.st_mode):o}")
    return found


def a_turn_that_writes(home: Path, root: Path) -> None:
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        srv.enqueue(
            Reply(tool_calls=[ToolCall("write_file", {"path": "private/key.txt", "content": "new secret\n"}, id="w")]),
            Reply(text="done"),
        )
        run = openheim("run", "rotate the key", cwd=root)
    assert run.returncode == 0, run.stderr


def test_run_under_umask_022_leaves_everything_private(isolated_home, tmp_path, umask_022):
    isolated_home.chmod(0o700)  # as openheim creates it; everything inside is created by the run
    root = tmp_path / "project"
    (root / "private").mkdir(parents=True)
    (root / "private" / "key.txt").write_text("secret\n")
    (root / "private" / "key.txt").chmod(0o600)
    a_turn_that_writes(isolated_home, root)
    (isolated_home / "config.toml").chmod(0o600)  # the test wrote it; openheim's own files are checked below
    blobs = list((isolated_home / "checkpoints" / "blobs").rglob("*"))
    assert any(p.is_file() for p in blobs), "the turn was checkpointed"
    assert list((isolated_home / "history").glob("*.jsonl")), "the conversation was stored"
    assert loose_entries(isolated_home) == []


def test_an_existing_loose_data_dir_is_repaired_with_one_line(isolated_home, tmp_path, umask_022):
    (isolated_home / "history").mkdir()
    (isolated_home / "history" / "old.jsonl").write_text("{}\n")
    (isolated_home / "history" / "old.jsonl").chmod(0o644)
    isolated_home.chmod(0o755)
    doctor = openheim("doctor", "--timeout", "0")
    assert "others can read it" in doctor.stdout, doctor.stdout
    root = tmp_path / "project"
    root.mkdir()
    a_turn_that_writes(isolated_home, root)
    (isolated_home / "config.toml").chmod(0o600)
    assert loose_entries(isolated_home) == []
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(text="hi"))
        isolated_home.chmod(0o750)
        again = openheim("run", "hello", cwd=root)
    repaired = [line for line in again.stderr.splitlines() if "private" in line]
    assert len(repaired) == 1 and "made" in repaired[0], again.stderr
    doctor = openheim("doctor", "--timeout", "0")
    assert "private: 0700" in doctor.stdout, doctor.stdout


def test_openheim_init_writes_config_toml_0600(isolated_home, umask_022):
    os.rmdir(isolated_home)
    result = openheim("init")
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((isolated_home / "config.toml").stat().st_mode) == 0o600
    assert stat.S_IMODE(isolated_home.stat().st_mode) == 0o700
    assert loose_entries(isolated_home) == []
