"""Start-up stays light: --version and importing the CLI load no heavy module."""

from __future__ import annotations

import subprocess
import sys

HEAVY = ("requests", "sseclient", "mcp", "sqlite_vec", "pydantic", "urllib3", "curses", "sqlite3", "websockets")


def test_version_and_cli_import_stay_light():
    code = (
        "import sys; sys.argv = ['openheim', '--version']\n"
        "from openheim.cli import main\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("openheim, version")
    assert lines[-1] == "HEAVY="


def test_import_openheim_is_lazy():
    code = "import sys, openheim; print(sorted(m for m in sys.modules if m.startswith('openheim.')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['openheim.version']"  # the version is a leaf module; nothing else loads


def _modules_imported_by_run(home, base_url: str, extra: str = "") -> set[str]:
    import os

    from cli_helpers import ROOT, write_config

    write_config(home, base_url, extra=extra)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "openheim", "run", "hi"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=60,
        cwd=home,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    return {line.rsplit("|", 1)[-1].strip() for line in r.stderr.splitlines() if line.startswith("import time:")}


def test_run_without_mcp_servers_never_imports_mcp(isolated_home):
    from fake_llm import FakeLLMServer
    from mcp_helpers import toml_server

    with FakeLLMServer(wire="openai") as srv:
        plain = _modules_imported_by_run(isolated_home, srv.base_url)
        with_server = _modules_imported_by_run(isolated_home, srv.base_url, extra=toml_server("fake"))
    assert "requests" in plain
    assert not {m for m in plain if m.split(".")[0] == "mcp" or m.startswith("openheim.mcp")}
    assert {"mcp", "openheim.mcp.bridge"} <= with_server  # the check above can fail


# Imported on first use only: a plain prompt must not pay for them. Tools are listed from their specs
# (openheim.tools.specs); an implementation, and ctypes (to make the process non-dumpable before any tool
# child exists), load on the first tool call.
TOOL_IMPLEMENTATIONS = (
    "openheim.tools.read_file",
    "openheim.tools.write_file",
    "openheim.tools.edit_file",
    "openheim.tools.list_dir",
    "openheim.tools.search",
    "openheim.tools.web_fetch",
    "openheim.tools.execute_command",
    "openheim.tools.process",
    "openheim.tools.presentation",
    "openheim.tools.plan",
)
LAZY_ON_RUN = (
    "openheim.tools.html_text",
    "openheim.tools.netguard",
    "openheim.tools.ignore",
    "openheim.memory.results",
    "openheim.config.recording_file",
    "mmap",
    "openheim.memory.embedding",
    "secrets",
    "ctypes",
    "markdown_it",
    "openheim.tui.markdown",  # the chat's Markdown renderer
    "openheim.core.hooks",  # the hook runner: only when a hook is configured
    "openheim.core.tool_view",  # how a tool call is shown: only with the first call
    "openheim.checkpoints.store",
    "openheim.checkpoints.prune",  # with the first snapshot of files
    "openheim.sandbox.policy",  # the shell's sandbox: only when the shell is on
    *TOOL_IMPLEMENTATIONS,
)


def test_plain_run_skips_tool_helpers_until_a_tool_needs_them(isolated_home):
    from fake_llm import FakeLLMServer, Reply, ToolCall

    with FakeLLMServer(wire="openai") as srv:
        plain = _modules_imported_by_run(isolated_home, srv.base_url)
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("search", {"pattern": "x"}),
                    ToolCall("web_fetch", {"url": "http://127.0.0.1:1/"}),
                    ToolCall("write_file", {"path": "new.txt", "content": "x"}),
                ]
            ),
            Reply(text="done"),
        )
        with_tools = _modules_imported_by_run(isolated_home, srv.base_url)
    assert "openheim.tools.builtins" in plain
    assert not set(LAZY_ON_RUN) & plain
    # the checks above can fail (modules the tools' implementations import, ctypes, and the checkpoint store
    # that write_file's snapshot opens)
    assert {
        "openheim.tools.ignore",
        "openheim.tools.netguard",
        "openheim.tools.search_rg",
        "ctypes",
        "openheim.core.tool_view",
        "openheim.checkpoints.store",
        "openheim.checkpoints.prune",
    } <= with_tools


def test_the_hook_runner_loads_once_a_hook_is_configured(isolated_home):
    from fake_llm import FakeLLMServer

    with FakeLLMServer(wire="openai") as srv:
        hooked = _modules_imported_by_run(
            isolated_home, srv.base_url, extra='[[hooks]]\nevent = "stop"\ncommand = "true"\n'
        )
    assert "openheim.core.hooks" in hooked  # so the LAZY_ON_RUN check on it can fail


def test_run_collects_garbage_again_once_started(isolated_home):
    """`run` holds the cycle collector off while start-up builds long-lived objects, then freezes them and
    turns it back on: a long run still collects its garbage."""
    import os

    from cli_helpers import ROOT, write_config
    from fake_llm import FakeLLMServer

    code = (
        "import gc, os, sys\n"
        "exit_now = os._exit\n"
        "def report(code):\n"
        "    print(f'GC enabled={gc.isenabled()} frozen={gc.get_freeze_count() > 0}', flush=True)\n"
        "    exit_now(code)\n"
        "os._exit = report\n"
        "sys.argv = ['openheim', 'run', 'hi']\n"
        "from openheim.__main__ import main\n"
        "main()\n"
    )
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        r = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdin=subprocess.DEVNULL,
            cwd=isolated_home,
        )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.splitlines()[-1] == "GC enabled=True frozen=True"
