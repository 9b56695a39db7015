"""Named Unix sockets are closed to sandboxed commands: the user's tmux server, and any listener outside the
roots, cannot be reached unless `[sandbox] allow_unix_sockets` names it (driven through `openheim run`)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import threading
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


@pytest.fixture
def tmux_server(tmp_path):
    """A real tmux server on its own socket (``tmux -L testsock``), in a private TMUX_TMPDIR."""
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    tmpdir = tmp_path / "tmux"
    tmpdir.mkdir()
    env = {**os.environ, "TMUX_TMPDIR": str(tmpdir)}
    env.pop("TMUX", None)
    subprocess.run(["tmux", "-L", "testsock", "new-session", "-d", "sleep 300"], env=env, check=True)
    yield env
    subprocess.run(["tmux", "-L", "testsock", "kill-server"], env=env)


def test_a_sandboxed_command_cannot_drive_the_users_tmux_server(srv, isolated_home, tmp_path, tmux_server):
    work, outside = tmp_path / "work", tmp_path / "OUTSIDE"
    work.mkdir()
    attack = f"tmux -L testsock run-shell 'touch {outside}'"
    env = {"TMUX_TMPDIR": tmux_server["TMUX_TMPDIR"], "TMUX": f"{tmux_server['TMUX_TMPDIR']}/x,1,0"}
    configure(isolated_home, srv, 'mode = "off"')
    run_commands(srv, work, [attack], env=env)
    assert outside.exists(), "the attack must work without the sandbox, or this test proves nothing"
    outside.unlink()
    configure(isolated_home, srv)
    results, _ = run_commands(srv, work, [attack], env=env)
    assert not outside.exists(), results
    assert "sandbox (workspace-write) refused" in results[0]


class Listener:
    """An AF_UNIX stream listener at ``path`` that counts the connections it accepts."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(path))
        self.sock.listen(4)
        self.sock.settimeout(0.2)
        self.accepted = 0
        self.stopped = False
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while not self.stopped:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self.stopped = True
        self.thread.join()
        self.sock.close()


CONNECT = "python3 -c \"import socket; s = socket.socket(socket.AF_UNIX); s.connect('{path}'); print('connected')\""


def test_a_listener_outside_the_roots_gets_no_connection_unless_allowed(srv, isolated_home, tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    path = outside / "agent.sock"
    listener = Listener(path)
    try:
        configure(isolated_home, srv)
        results, _ = run_commands(srv, work, [CONNECT.format(path=path)])
        assert listener.accepted == 0 and "connected" not in results[0], results
        assert "sandbox (workspace-write) refused a Unix socket" in results[0]
        configure(isolated_home, srv, f'allow_unix_sockets = ["{path}"]')
        results, done = run_commands(srv, work, [CONNECT.format(path=path)])
        assert "connected" in results[0] and listener.accepted == 1, results
        if landlock_abi() < 9:
            assert "allow_unix_sockets" in done.stderr and "every named Unix socket" in done.stderr
    finally:
        listener.close()
