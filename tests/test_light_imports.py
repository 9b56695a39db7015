"""Start-up stays light: --version and importing the CLI load no heavy module."""
from __future__ import annotations

import subprocess
import sys

HEAVY = ("requests", "sseclient", "mcp", "sqlite_vec", "pydantic", "urllib3", "curses", "sqlite3", "websockets")


def test_version_and_cli_import_stay_light():
    code = ("import sys; sys.argv = ['openheim', '--version']\n"
            "from openheim.cli import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            f"print('HEAVY=' + ','.join(m for m in {HEAVY!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    lines = out.strip().splitlines()
    assert lines[0].startswith("openheim, version")
    assert lines[-1] == "HEAVY="


def test_import_openheim_is_lazy():
    code = "import sys, openheim; print(len([m for m in sys.modules if m.startswith('openheim.')]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "0"
