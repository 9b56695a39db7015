"""A command that meets several kinds of refusal gets one line for each kind, once (issue 42, item 10)."""

from __future__ import annotations

import pytest
from fake_llm import FakeLLMServer
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")
UDP = 'python3 -c "import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"'
UNIX = "python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/tmp/.X11-unix/X0')\""


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_every_kind_of_refusal_is_named_once(srv, isolated_home, tmp_path):
    work, outside = tmp_path / "work", tmp_path / "outside"
    work.mkdir()
    outside.mkdir()
    configure(isolated_home, srv)
    command = f"echo x > {outside}/a; echo x > {outside}/b; {UDP}; {UDP}; {UNIX}; exit 1"
    results, _ = run_commands(srv, work, [command])
    lines = [line for line in results[0].splitlines() if line.startswith("sandbox (workspace-write) refused")]
    kinds = sorted(line.split(" refused ")[1].split()[0:2][0] for line in lines)
    assert kinds == ["a", "a", "writing"], lines  # a Unix socket, a network socket, writing ...
    assert any("Unix socket" in line for line in lines) and any("network socket" in line for line in lines)
