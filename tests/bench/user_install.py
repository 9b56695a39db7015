"""A regular (non-editable) install of this checkout in its own venv, as a user would have it.

The venv is kept in the system temp dir and reinstalled (without re-fetching dependencies) whenever
the package's sources change.
"""
from __future__ import annotations

import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT


def source_stamp() -> str:
    h = hashlib.sha256()
    for path in sorted((ROOT / "openheim").rglob("*.py")) + [ROOT / "pyproject.toml"]:
        h.update(str(path.relative_to(ROOT)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def user_venv() -> Path:
    """The venv's path; created or refreshed as needed (the first time takes about a minute)."""
    venv = Path(tempfile.gettempdir()) / "openheim-bench-venv"
    stamp_file = venv / "openheim-source-stamp"
    stamp = source_stamp()
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return venv
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], check=True)
    else:
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--force-reinstall", "--no-deps", str(ROOT)],
                       check=True)
    stamp_file.write_text(stamp)
    return venv
