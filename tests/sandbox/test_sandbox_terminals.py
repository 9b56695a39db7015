"""Sandboxed commands cannot reach other terminals: no write to another pty, no TIOCSTI (typing into a
terminal) from `openheim run` or from `openheim sandbox exec` running in a pty (as an ACP terminal does)."""

from __future__ import annotations

import os
import subprocess
import tty
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from sandbox_attack import configure, run_commands, sandbox_exec

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")
INJECT = (
    "python3 -c \"import fcntl, os, termios; fd = {fd}; fcntl.ioctl(fd, termios.TIOCSTI, b'X'); print('injected')\""
)


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


@pytest.fixture
def pty_pair():
    """A second terminal: (master fd, slave fd, its /dev/pts path)."""
    master, slave = os.openpty()
    tty.setraw(slave)  # an injected byte is readable at once (no line discipline waiting for a newline)
    os.set_blocking(master, False)
    os.set_blocking(slave, False)
    yield master, slave, os.ttyname(slave)
    os.close(master)
    os.close(slave)


def pending(fd: int) -> bytes:
    try:
        return os.read(fd, 4096)
    except (BlockingIOError, OSError):
        return b""


def test_a_command_cannot_write_to_another_terminal(srv, isolated_home, tmp_path, pty_pair):
    master, _slave, name = pty_pair
    work = tmp_path / "work"
    work.mkdir()
    configure(isolated_home, srv, 'mode = "off"')
    run_commands(srv, work, [f"printf pwned > {name}"])
    assert b"pwned" in pending(master), "unconfined, the write reaches the terminal (else this test proves nothing)"
    configure(isolated_home, srv)
    results, _ = run_commands(srv, work, [f"printf pwned > {name}", "ls /dev/pts"])
    assert pending(master) == b"", results
    assert Path(name).name not in results[1].split(), results[1]  # only a fresh /dev/pts: ptmx and its own


def test_tiocsti_from_run_fails(srv, isolated_home, tmp_path, pty_pair):
    _master, slave, name = pty_pair
    work = tmp_path / "work"
    work.mkdir()
    opener = f"os.open('{name}', os.O_RDONLY | os.O_NOCTTY)"
    configure(isolated_home, srv)
    results, _ = run_commands(
        srv, work, [INJECT.format(fd=opener), INJECT.format(fd="os.open('/dev/tty', os.O_RDONLY)")]
    )
    assert pending(slave) == b"", results
    assert all("injected" not in r for r in results), results


def test_tiocsti_from_sandbox_exec_in_a_pty_fails(tmp_path, pty_pair):
    """The command's own terminal is its stdin (an ACP terminal): it still cannot type into it."""
    _master, slave, _name = pty_pair
    work = tmp_path / "work"
    work.mkdir()
    if os.geteuid() == 0:  # root types into any terminal unconfined: the attack is real
        plain = subprocess.run(["sh", "-c", INJECT.format(fd=0)], stdin=slave, capture_output=True, text=True)
        assert "injected" in plain.stdout and pending(slave) == b"X"
    done = sandbox_exec(work, INJECT.format(fd=0), stdin=slave)
    assert "injected" not in done.stdout, done.stderr
    assert pending(slave) == b""
    assert "Operation not permitted" in done.stderr
