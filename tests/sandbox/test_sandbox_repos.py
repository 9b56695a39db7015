"""Every repository under a writable root is protected (nested ones, submodules and their gitfiles), also when
the kernel refuses the mount namespace, and then `openheim run` says so in one line (no silent downgrade);
`required = true` refuses commands instead."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli_helpers import ROOT
from fake_llm import FakeLLMServer, Reply, ToolCall
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")

# Runs openheim under a seccomp filter that refuses unshare(2) with EPERM, as Ubuntu's AppArmor restriction
# on user namespaces or Docker's default profile would: the helper cannot make its mount namespace.
NO_UNSHARE = r"""
import ctypes, os, struct, sys
ops = [(0x20, 0, 0, 0), (0x15, 0, 1, 272), (0x06, 0, 0, 0x00050001), (0x06, 0, 0, 0x7FFF0000)]
prog = b"".join(struct.pack("=HBBI", *op) for op in ops)
buf = ctypes.create_string_buffer(prog, len(prog))
fprog = struct.pack("=HxxxxxxQ", len(ops), ctypes.addressof(buf))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.prctl(38, 1, 0, 0, 0) == 0 and libc.prctl(22, 2, fprog, 0, 0) == 0
os.execv(sys.executable, [sys.executable, "-m", "openheim", *sys.argv[1:]])
"""


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


@pytest.fixture
def repos(tmp_path: Path) -> dict[str, Path]:
    """work/ (a repository) holding vendor/lib (a nested repository) and sub (a submodule: a gitfile)."""
    work = tmp_path / "work"
    files = {
        "nested": work / "vendor" / "lib" / ".git" / "config",
        "module": work / ".git" / "modules" / "sub" / "config",
        "gitfile": work / "sub" / ".git",
        "settings": work / "tools" / ".openheim" / "settings.toml",
    }
    for path in files.values():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("[core]\n" if path.name != ".git" else "gitdir: ../.git/modules/sub\n")
    return {"work": work, **files}


ATTACKS = [
    "echo '[core] fsmonitor = \"touch /tmp/pwned\"' >> vendor/lib/.git/config",
    "echo 'gitdir: /tmp/evil' > sub/.git",
    "echo '[core] hooksPath = /tmp' >> .git/modules/sub/config",
    "rm -f vendor/lib/.git/config; mv sub/.git sub/git-moved",
    "echo 'allow = [\"*\"]' >> tools/.openheim/settings.toml",
    "cd vendor/lib && git config core.fsmonitor evil 2>&1 || echo refused",
]


def unchanged(repos: dict[str, Path]) -> None:
    for key in ("nested", "module", "settings"):
        assert repos[key].read_text() == "[core]\n", key
    assert repos["gitfile"].read_text() == "gitdir: ../.git/modules/sub\n"


def test_nested_repositories_and_submodules_stay_unchanged(srv, isolated_home, repos):
    configure(isolated_home, srv)
    results, _ = run_commands(srv, repos["work"], [*ATTACKS, "echo ok > vendor/lib/file.c && cat vendor/lib/file.c"])
    unchanged(repos)
    assert results[-1] == "ok\n"  # the rest of the tree stays writable


def run_without_unshare(work: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", NO_UNSHARE, "run", "go", "--cwd", str(work), *args],
        cwd=work,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def test_without_namespaces_run_says_so_once_and_landlock_still_protects_git(srv, isolated_home, repos):
    configure(isolated_home, srv)
    srv.enqueue(
        Reply(tool_calls=[ToolCall("execute_command", {"command": c}, id=f"c{i}") for i, c in enumerate(ATTACKS)]),
        Reply(tool_calls=[ToolCall("execute_command", {"command": "echo fine > new.txt; cat new.txt"}, id="n")]),
        Reply(text="done"),
    )
    done = run_without_unshare(repos["work"])
    assert done.returncode == 0, done.stderr
    unchanged(repos)
    notes = [line for line in done.stderr.splitlines() if "not fully enforced" in line]
    assert len(notes) == 1 and "mount namespace" in notes[0] and "Landlock instead" in notes[0], done.stderr
    results = {m["tool_call_id"]: m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool"}
    assert "fine" in results["n"] or "refused" in results["n"]


def test_without_namespaces_required_refuses(srv, isolated_home, repos):
    configure(isolated_home, srv, "required = true")
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "touch made"})]), Reply(text="done"))
    done = run_without_unshare(repos["work"])
    assert done.returncode == 0, done.stderr
    assert not (repos["work"] / "made").exists()
    result = next(m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool")
    assert "Command refused" in result and "mount namespace" in result


def test_doctor_shows_the_missing_layer(isolated_home, tmp_path):
    (isolated_home / "config.toml").write_text("allow_shell = true\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", NO_UNSHARE, "doctor", "--json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    import json

    sandbox = json.loads(done.stdout)["sandbox"]
    assert sandbox["status"] == "warn" and any("mount namespace" in g for g in sandbox["not_enforced"]), sandbox
    assert sandbox["enforced"]["filesystem"] and sandbox["enforced"]["seccomp"]
