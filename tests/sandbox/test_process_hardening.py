"""Shell children cannot read openheim's own environment (the provider key) through /proc/$PPID/environ.

Run as an unprivileged user: root reads every process's environ whatever it does.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from cli_helpers import ROOT
from fake_llm import FakeLLMServer, Reply, ToolCall

NOBODY = 65534
ATTACK = "tr '\\0' '\\n' </proc/$PPID/environ; echo uid=$(id -u)"


def _as_nobody() -> list[str]:
    """A command prefix that runs as an unprivileged user, or skip saying why there is none."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_DUMPABLE and /proc are Linux-only")
    if os.geteuid() != 0:
        return []  # already unprivileged
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("setpriv (util-linux) is not installed, so no unprivileged user can be switched to")
    plain = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = [sys.executable, "-c", "import openheim"]
    env = {"PYTHONPATH": str(ROOT), "PATH": os.environ.get("PATH", "")}
    if subprocess.run(plain + probe, env=env, capture_output=True).returncode == 0:
        return plain
    # The interpreter or the checkout is not readable by nobody (e.g. under /root): keep only the
    # right to read files. It does not open /proc/PID/environ of a non-dumpable process, which
    # needs CAP_SYS_PTRACE.
    reading = plain + ["--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"]
    if subprocess.run(reading + probe, env=env, capture_output=True).returncode == 0:
        return reading
    pytest.skip("no unprivileged user can run this checkout's Python here")


@pytest.fixture
def nobody_home():
    home = Path(tempfile.mkdtemp(prefix="openheim-nobody-"))
    (home / ".openheim").mkdir()
    (home / "work").mkdir()
    for path in (home, home / ".openheim", home / "work"):
        if os.geteuid() == 0:
            os.chown(path, NOBODY, NOBODY)
    yield home
    shutil.rmtree(home, ignore_errors=True)


def test_shell_children_cannot_read_openheims_environment(nobody_home):
    prefix = _as_nobody()
    key = "sk-mock-" + secrets.token_hex(12)
    with FakeLLMServer(wire="openai") as srv:
        (nobody_home / ".openheim" / "config.toml").write_text(
            f'default_provider = "mock"\nallow_shell = true\n[providers.mock]\nkind = "openai_compatible"\n'
            f'api_base = "{srv.base_url}"\ndefault_model = "m"\nmodels = ["m"]\nenv_var = "MOCK_API_KEY"\n'
        )
        srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": ATTACK})]), Reply(text="done"))
        env = {
            "PATH": os.environ.get("PATH", ""),
            "PYTHONPATH": str(ROOT),
            "HOME": str(nobody_home),
            "OPENHEIM_HOME": str(nobody_home / ".openheim"),
            "NO_PROXY": "127.0.0.1",
            "MOCK_API_KEY": key,
        }
        # --sandbox off: the sandbox helper re-runs this Python, which the unprivileged user may not be able to
        # start here (e.g. it lives under /root); the sandboxed case is tests/sandbox/test_shell_sandbox.py's
        r = subprocess.run(
            prefix + [sys.executable, "-m", "openheim", "run", "go", "--sandbox", "off"],
            cwd=nobody_home / "work",
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
        assert r.returncode == 0, r.stderr
        assert srv.requests[0].headers.get("Authorization") == f"Bearer {key}"  # openheim itself had the key
        result = next(m for m in srv.requests[1].body["messages"] if m["role"] == "tool")["content"]
    assert f"uid={NOBODY}" in result or os.geteuid() != 0
    assert "Permission denied" in result, result
    assert key not in result and "MOCK_API_KEY" not in result


def test_the_process_turns_non_dumpable_before_the_first_tool_runs():
    """Library users get the same protection: a plain prompt pays nothing for it (no ctypes), and the process
    is made non-dumpable before the first built-in tool is loaded, so before any child can exist."""
    if not sys.platform.startswith("linux"):
        pytest.skip("Linux-only")
    code = (
        "import sys, openheim\n"
        "client = openheim.OpenheimClient.builder().provider('openai').api_key('k').api_base(sys.argv[1])"
        ".model('m').build()\n"
        "session = client.new_session()\n"
        "session.prompt('no tools')\n"
        "plain = 'ctypes' in sys.modules\n"
        "import ctypes\n"
        "get = lambda: ctypes.CDLL(None).prctl(3, 0, 0, 0, 0)  # PR_GET_DUMPABLE\n"
        "before = get()\n"
        "session.prompt('list it')\n"
        "print(plain, before, get())"
    )
    with FakeLLMServer(wire="openai") as srv:
        srv.enqueue(Reply(text="fine"), Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="done"))
        with tempfile.TemporaryDirectory() as home:
            r = subprocess.run(
                [sys.executable, "-c", code, srv.base_url],
                capture_output=True,
                text=True,
                cwd=home,
                env={**os.environ, "PYTHONPATH": str(ROOT), "OPENHEIM_HOME": home, "HOME": home},
            )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "1", "0"]
