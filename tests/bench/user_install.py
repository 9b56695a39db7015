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


def source_stamp(root: Path = ROOT) -> str:
    h = hashlib.sha256()
    for path in sorted((root / "openheim").rglob("*.py")) + [root / "pyproject.toml"]:
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def user_venv(root: Path = ROOT, name: str = "openheim-bench-venv") -> Path:
    """The venv's path; created or refreshed as needed (the first time takes about a minute)."""
    venv = Path(tempfile.gettempdir()) / name
    stamp_file = venv / "openheim-source-stamp"
    stamp = source_stamp(root)
    if stamp_file.exists() and stamp_file.read_text() == stamp:
        return venv
    if not (venv / "bin" / "python").exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(root)], check=True)
    else:
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "-q", "--force-reinstall", "--no-deps", str(root)], check=True
        )
    stamp_file.write_text(stamp)
    return venv


def revision_venv(ref: str) -> Path:
    """A regular install of git revision ``ref`` of this repository, in its own venv (for before/after rows)."""
    sha = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--verify", f"{ref}^{{commit}}"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", sha], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        return user_venv(Path(tmp), f"openheim-bench-{sha[:12]}")
