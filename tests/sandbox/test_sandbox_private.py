"""What a sandboxed command may not see or forge: openheim's data dir (config with the key, MCP tokens, the serve
token, every project's history), the fork server's socket, namespace calls; and a `writable_roots` entry that a
symlink in the repository would widen is left out, with one line saying so."""

from __future__ import annotations

import os
import socket

import pytest
from fake_llm import FakeLLMServer
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi
from openheim.sandbox.server import Served

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")
CLONE3 = (
    'python3 -c "import ctypes; libc = ctypes.CDLL(None, use_errno=True); '
    "print('clone3', libc.syscall(435, None, 0), ctypes.get_errno())\""
)


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_the_data_dir_is_hidden_from_commands(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    configure(isolated_home, srv)
    secrets = {
        "mcp-auth/github.json": '{"access_token": "mcp-TOKEN-value"}',
        "serve-token": "serve-TOKEN-value",
        "history/other-project/s1.jsonl": '{"text": "other-HISTORY-value"}',
        "checkpoints/blobs/ab": "checkpoint-BLOB-value",
    }
    for rel, text in secrets.items():
        (isolated_home / rel).parent.mkdir(parents=True, exist_ok=True)
        (isolated_home / rel).write_text(text)
    commands = [f"cat {isolated_home / rel}" for rel in ["config.toml", *secrets]] + [f"ls -R {isolated_home}"]
    results, _ = run_commands(srv, work, commands)
    everything = "\n".join(results)
    for value in ["sk-test-SECRET-123", *secrets.values()]:
        assert value not in everything, value
    assert "serve-token" not in results[-1] and "config.toml" not in results[-1]


def test_no_fork_server_socket_no_namespaces_no_clone3(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    configure(isolated_home, srv)
    commands = [
        "for fd in 3 4 5 6 7 8 9 10; do [ -e /proc/$$/fd/$fd ] && echo open $fd; done; echo checked",
        "unshare -U true && echo userns-made",
        "unshare -m true && echo mountns-made",
        CLONE3,
    ]
    results, _ = run_commands(srv, work, commands)
    assert results[0] == "checked\n", results[0]
    assert "userns-made" not in results[1] and "mountns-made" not in results[2]
    assert "clone3 -1 38" in results[3]  # ENOSYS: libc falls back to clone, whose flags the filter checks


@pytest.mark.parametrize("answer", [b"not json", b"[1, 2]", b'{"status": "9"}', b'{"status": -1}', b"{" * 70000])
def test_a_malformed_or_huge_answer_is_a_clean_end_not_a_traceback(answer):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    r, w = os.pipe()
    os.close(w)
    try:
        theirs.send(answer[: 1 << 16])
        with os.fdopen(r, "rb", 0) as out, open(os.devnull, "rb") as err:
            served = Served(os.getpid(), ours, out, err)
            assert served.wait(timeout=5) == -9  # reported as a killed command
    finally:
        theirs.close()


def test_a_writable_root_through_a_symlink_in_the_repository_is_left_out(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    os.symlink("..", work / "node_modules")  # shipped by the repository: widens the root to its parent
    configure(isolated_home, srv, f'writable_roots = ["{work / "node_modules"}"]')
    results, done = run_commands(srv, work, [f"touch {tmp_path / 'escaped'}"])
    assert not (tmp_path / "escaped").exists(), results
    notes = [line for line in done.stderr.splitlines() if "writable_roots entry" in line]
    assert len(notes) == 1 and "node_modules" in notes[0] and "symlink" in notes[0], done.stderr
