"""Files we cannot read or write: one line saying what, where and why, never `internal error: PermissionError`.

Permissions mean nothing to root, so when the tests run as root (CI does) the CLI runs as the unprivileged
user ``nobody`` through ``setpriv``; as any other user it runs as that user. The full disk is a real tiny tmpfs.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from acp_wire import AcpWire
from cli_helpers import ROOT, openheim, write_config
from fake_llm import FakeLLMServer

NOBODY = 65534


def _unprivileged_prefix() -> list[str]:
    if os.geteuid() != 0:
        return []
    prefix, problem = _setpriv()
    if problem:
        pytest.skip(problem)
    return prefix


@functools.lru_cache(maxsize=1)
def _setpriv() -> tuple[list[str], str | None]:
    """The command prefix that runs as ``nobody``, or why it cannot run this checkout."""
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        return [], "running as root and setpriv (util-linux) is missing: permissions cannot be tested"
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run(
        [*prefix, sys.executable, "-c", "import openheim.cli"],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")},
        cwd="/",
        timeout=60,
    )
    if probe.returncode != 0:
        return [], (
            f"user nobody cannot run this checkout's Python ({sys.executable}; is a parent directory "
            f"private?): {probe.stderr.strip().splitlines()[-1:] or probe.returncode}"
        )
    return prefix, None


@pytest.fixture
def world(tmp_path):
    """A directory every user can enter (pytest's tmp_path is private to its owner)."""
    base = Path(tempfile.mkdtemp(prefix="openheim-oserr-"))
    base.chmod(0o755)
    try:
        yield base
    finally:
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture
def srv(world):
    with FakeLLMServer(wire="openai") as server:
        (world / "cfg").mkdir(mode=0o755)
        write_config(world / "cfg", server.base_url).chmod(0o644)
        yield server


def _as_user(*args: str, home: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    """The CLI as an unprivileged user with HOME=``home`` and the test config."""
    full_env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": str(ROOT),
        "HOME": str(home),
        "NO_PROXY": "127.0.0.1,localhost",
        "OPENHEIM_CONFIG": str(home.parent / "cfg" / "config.toml"),
        **(env or {}),
    }
    return subprocess.run(
        [*_unprivileged_prefix(), sys.executable, "-m", "openheim", *args],
        capture_output=True,
        text=True,
        env=full_env,
        cwd=home.parent,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def _one_line(r: subprocess.CompletedProcess) -> str:
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert "internal error" not in lines[0] and "Errno" not in lines[0], lines[0]
    return lines[0]


def _owned_by_user(path: Path) -> None:
    if os.geteuid() == 0:
        os.chown(path, NOBODY, NOBODY)


def test_read_only_home(srv, world):
    home = world / "home"
    home.mkdir(mode=0o555)  # nobody may create ~/.openheim here
    if os.geteuid() != 0:
        pytest.skip("the test user owns the home it makes and could chmod it back; covered when run as root")
    r = _as_user("run", "hi", home=home)
    assert r.returncode == 1
    assert _one_line(r) == (
        f"Error: could not create directory {home / '.openheim'}: Permission denied (check its owner and permissions)"
    )
    assert srv.requests == []


def test_session_files_owned_by_root(srv, world):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the session's files to another owner")
    home = world / "home"
    home.mkdir()
    _owned_by_user(home)
    r = _as_user("run", "-o", "json", "hi", home=home)
    assert r.returncode == 0, r.stderr
    sid = json.loads(r.stdout)["session_id"]
    log = home / ".openheim" / "history" / f"{sid}.jsonl"
    os.chown(log, 0, 0)
    log.chmod(0o600)
    for args in (("run", "-s", sid, "again"), ("sessions", "show", sid)):
        r = _as_user(*args, home=home)
        assert r.returncode == 1
        assert _one_line(r) == f"Error: could not read {log}: Permission denied (check its owner and permissions)"
    assert len(srv.requests) == 1


def test_data_dir_that_is_a_file(srv, world):
    home = world / "home"
    home.mkdir()
    in_the_way = world / "afile"
    in_the_way.write_text("x")
    for args in (("run", "hi"), ("sessions", "list"), ("memory", "list")):
        r = openheim(
            *args,
            env={"OPENHEIM_CONFIG": str(world / "cfg" / "config.toml"), "OPENHEIM_HOME": str(in_the_way)},
            cwd=world,
        )
        assert r.returncode == 2, (args, r.stderr)
        assert _one_line(r) == (
            f"Error: Config error: the data directory {in_the_way} is a file, not a directory; "
            "point data_dir in config.toml (or OPENHEIM_HOME) at a directory"
        )


def test_acp_prompt_on_a_read_only_home_is_a_one_line_rpc_error(srv, world):
    if os.geteuid() != 0:
        pytest.skip("the test user owns the home it makes; covered when run as root")
    home = world / "home"
    home.mkdir(mode=0o555)
    project = world / "project"
    project.mkdir(mode=0o755)
    wire = AcpWire(
        env={
            "HOME": str(home),
            "OPENHEIM_HOME": str(home / ".openheim"),
            "OPENHEIM_CONFIG": str(world / "cfg" / "config.toml"),
        },
        cwd=world,
        prefix=tuple(_unprivileged_prefix()),
    )
    try:
        wire.initialize()
        sid = wire.new_session(project)
        response, _ = wire.prompt(sid, "hi")
        assert response["error"] == {
            "code": -32603,
            "message": (
                f"could not create directory {home / '.openheim'}: Permission denied (check its owner and permissions)"
            ),
        }
    finally:
        wire.close()
    assert srv.requests == []


def test_a_full_disk_names_the_lock_file(tmp_path):
    disk = tmp_path / "disk"
    disk.mkdir()
    r = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k,mode=0700", "tmpfs", str(disk)], capture_output=True, text=True
    )
    if r.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root and mount permission): {r.stderr.strip()}")
    try:
        with FakeLLMServer(wire="openai") as srv:
            config = write_config(tmp_path, srv.base_url)
            (disk / "history").mkdir()
            fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT)
            try:
                while True:
                    os.write(fd, b"x" * 4096)
            except OSError:
                pass
            finally:
                os.close(fd)
            r = openheim("run", "hi", cwd=tmp_path, env={"OPENHEIM_HOME": str(disk), "OPENHEIM_CONFIG": str(config)})
            assert r.returncode == 1
            lock = next((disk / "history").glob("*.lock"), None)
            assert lock is None  # nothing half-made is left behind
            line = _one_line(r)
            assert line.startswith(f"Error: could not write the lock file {disk / 'history'}/")
            assert line.endswith(".lock: No space left on device (free some disk space and try again)")
            assert srv.requests == []
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=False)


def test_memory_on_a_read_only_home(srv, world):
    home = world / "home"
    home.mkdir(mode=0o555)
    if os.geteuid() != 0:
        pytest.skip("the test user owns the home it makes and could chmod it back; covered when run as root")
    r = _as_user("memory", "add", "a note", home=home)
    assert r.returncode == 1
    assert _one_line(r) == (
        f"Error: could not create directory {home / '.openheim'}: Permission denied (check its owner and permissions)"
    )


def test_an_unreadable_history_directory_is_not_an_empty_one(srv, world):
    if os.geteuid() != 0:
        pytest.skip("needs root to give the history directory to another owner")
    home = world / "home"
    home.mkdir()
    _owned_by_user(home)
    assert _as_user("run", "hi", home=home).returncode == 0
    history = home / ".openheim" / "history"
    os.chown(history, 0, 0)
    history.chmod(0o700)
    r = _as_user("sessions", "list", home=home)
    assert r.returncode == 1
    assert _one_line(r) == f"Error: could not read {history}: Permission denied (check its owner and permissions)"
