"""The root command: a missing package is named, with how to get it (never "No such command")."""

from __future__ import annotations

import subprocess
import sys

from cli_helpers import write_config

BLOCKED = """
import sys
sys.modules[{module!r}] = None  # as if the package were not installed
sys.argv = ["openheim", *{args!r}]
from openheim.cli import main
main()
"""


def run_without(module: str, *args: str) -> subprocess.CompletedProcess:
    code = BLOCKED.format(module=module, args=list(args))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_a_missing_dependency_is_named_with_how_to_install_it(isolated_home):
    write_config(isolated_home, "http://127.0.0.1:9")
    r = run_without("websockets", "serve", "--port", "0")
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        "Error: `openheim serve` needs the Python package 'websockets', which is not installed: pip install websockets"
    ]


def test_a_missing_module_of_openheim_says_the_install_is_incomplete(isolated_home):
    r = run_without("openheim.commands.mcp", "mcp")
    assert r.returncode == 1
    assert "cannot load openheim.commands.mcp: this openheim install is incomplete" in r.stderr
    assert "No such command" not in r.stderr and "Traceback" not in r.stderr
