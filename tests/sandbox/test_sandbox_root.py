"""Root is not special inside the sandbox: no capabilities, no device nodes, no raw or netlink sockets with the
network off; and the key attacks also fail for an unprivileged user (CI runs as root: `setpriv` makes one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest
from cli_helpers import ROOT
from fake_llm import FakeLLMServer
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")
PY_SOCKET = "python3 -c \"import socket; socket.socket(socket.{family}, socket.SOCK_RAW); print('opened')\""


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_a_command_run_as_root_has_no_capabilities_devices_or_raw_sockets(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    configure(isolated_home, srv)
    commands = [
        "mknod disk b 8 0; mknod mem c 1 1; ls",
        PY_SOCKET.format(family="AF_PACKET"),
        PY_SOCKET.format(family="AF_NETLINK"),
        "grep -E '^Cap(Eff|Prm|Bnd|Amb)' /proc/self/status",
        "hostname sandbox-escaped",
    ]
    results, _ = run_commands(srv, work, commands)
    assert not (work / "disk").exists() and not (work / "mem").exists(), results[0]
    assert "opened" not in results[1] and "opened" not in results[2], results
    caps = dict(line.split(":") for line in results[3].strip().splitlines())
    assert {k: v.strip() for k, v in caps.items()} == dict.fromkeys(caps, "0000000000000000") and len(caps) == 4
    assert os.uname().nodename != "sandbox-escaped"


NOBODY = 65534


@pytest.fixture
def nobody_tree():
    """work/ (a repository with a nested one) and outside/, owned by nobody, in a directory nobody can reach."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not os.path.exists("/usr/bin/python3"):
        pytest.skip("needs root, setpriv and /usr/bin/python3 to run as an unprivileged user")
    top = Path(tempfile.mkdtemp(prefix="openheim-nobody-", dir="/tmp"))
    work, outside = top / "work", top / "outside"
    (work / "vendor" / "lib" / ".git").mkdir(parents=True)
    (work / "vendor" / "lib" / ".git" / "config").write_text("[core]\n")
    outside.mkdir()
    (outside / "victim").write_text("original\n")
    for path in [top, *top.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    os.chmod(top, 0o755)
    yield work, outside
    shutil.rmtree(top)


def as_nobody(work: Path, command: str) -> subprocess.CompletedProcess:
    """The helper (standard library only) run by /usr/bin/python3 as nobody, as `openheim sandbox exec` would."""
    launch = (
        f"import sys;sys.path[0]={str(ROOT)!r};from openheim.sandbox import helper;sys.exit(helper.main(sys.argv[1:]))"
    )
    argv = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/usr/bin/python3", "-I", "-S"]
    argv += ["-c", launch, "--write", str(work), "--", "sh", "-c", command]
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"})


def test_the_key_attacks_fail_for_an_unprivileged_user_too(nobody_tree):
    work, outside = nobody_tree
    git_config = work / "vendor" / "lib" / ".git" / "config"
    attacks = [
        f"echo pwned > {outside}/victim",
        f"echo '[core] fsmonitor = evil' >> {git_config}",
        "/usr/bin/python3 -c \"import socket; socket.socket(socket.AF_UNIX).connect('/tmp/.X11-unix/X0')\"",
        "/usr/bin/python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM); print('udp')\"",
        "unshare -Ur true && echo userns",
    ]
    for attack in attacks:
        done = as_nobody(work, attack)
        assert done.returncode != 0 and "udp" not in done.stdout and "userns" not in done.stdout, (attack, done)
    assert (outside / "victim").read_text() == "original\n"
    assert git_config.read_text() == "[core]\n"
    ok = as_nobody(work, "echo fine > inside.txt && grep -E '^CapEff' /proc/self/status")
    assert ok.returncode == 0 and (work / "inside.txt").read_text() == "fine\n", ok.stderr
