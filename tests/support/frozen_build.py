"""The session's frozen build (build/dist/openheim), shared by tests/packaging/test_frozen.py and the chat's frozen check.

Built with build/build.sh unless it is newer than every source it is made from, or $OPENHEIM_FROZEN_BIN (for
example the onedir build) is used as given. Under pytest-xdist each worker has its own session, so the build
runs under a file lock: the first worker builds, the others wait and then find it fresh.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BIN = ROOT / "build" / "dist" / "openheim"
LOCK = ROOT / "build" / ".frozen-build.lock"
BUILD_LOG = ROOT / "build" / "work" / "frozen-build-output.txt"  # what build/build.sh printed for DEFAULT_BIN


def _sources() -> list[Path]:
    """Everything the binary is built from: the package, the entry script, the spec and its hooks."""
    return [
        *ROOT.joinpath("openheim").rglob("*.py"),
        ROOT / "openheim.py",
        ROOT / "build" / "openheim.spec",
        ROOT / "build" / "build.sh",
        ROOT / "build" / "pack.sh",
        ROOT / "build" / "launcher.sh",
        *ROOT.joinpath("build", "hooks").glob("*.py"),
    ]


def _is_fresh(binary: Path) -> bool:
    if not binary.is_file():
        return False
    built = binary.stat().st_mtime
    return all(p.stat().st_mtime < built for p in _sources())


def _build() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENHEIM_ONEDIR", "OPENHEIM_WITH_MCP")}
    r = subprocess.run(
        ["bash", str(ROOT / "build" / "build.sh")],
        check=False,
        capture_output=True,
        text=True,
        timeout=900,
        stdin=subprocess.DEVNULL,
        env=env,
    )
    assert r.returncode == 0, f"build failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    BUILD_LOG.parent.mkdir(parents=True, exist_ok=True)
    BUILD_LOG.write_text(r.stdout + r.stderr)


@pytest.fixture(scope="session")
def frozen_bin(tmp_path_factory) -> Path:
    # One unpacked copy for the whole session (each test has its own HOME, so ~/.cache would differ).
    os.environ["OPENHEIM_CACHE_DIR"] = str(tmp_path_factory.mktemp("openheim-cache"))
    given = os.environ.get("OPENHEIM_FROZEN_BIN")
    if given:
        return Path(given).resolve()
    LOCK.parent.mkdir(parents=True, exist_ok=True)
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another xdist worker may be building it right now
        if not _is_fresh(DEFAULT_BIN):
            _build()
    assert _is_fresh(DEFAULT_BIN), f"{DEFAULT_BIN} is missing or older than the sources after the build"
    return DEFAULT_BIN
