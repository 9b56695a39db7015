"""Benchmark: the search tool over 20,000 files (half .gitignored) against rg and grep -r.

Run: .venv/bin/python tests/bench/bench_search.py
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openheim.tools.search import run_search

FILES = 20000
DIRS = 100
TARGET_RATIO = 3.0
PATTERN = "needle_[0-9]+ found"
PYTHON_ONLY_PATTERN = r"needle_\d+ found"


def ensure_rg() -> str | None:
    """rg's path, installing the Debian package when missing and we are root."""
    if shutil.which("rg") is None and os.geteuid() == 0 and shutil.which("apt-get"):
        print("installing ripgrep with apt-get ...", flush=True)
        subprocess.run(["apt-get", "update", "-qq"], check=False, capture_output=True)
        subprocess.run(["apt-get", "install", "-y", "-qq", "ripgrep"], check=False, capture_output=True)
    return shutil.which("rg")


def build_tree(root: Path) -> None:
    """FILES files in DIRS nested directories; every second file is a .tmp excluded by .gitignore."""
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("*.tmp\n")
    per_dir = FILES // DIRS
    body = "".join(f"line {i} of some ordinary source text = value_{i}\n" for i in range(30))
    for d in range(DIRS):
        directory = root / f"pkg{d // 10}" / f"mod{d % 10}"
        directory.mkdir(parents=True)
        for f in range(per_dir):
            suffix = ".tmp" if f % 2 else ".py"
            extra = f"needle_{d}_{f} found here\n" if f % 25 == 0 else ""
            (directory / f"file{f:03d}{suffix}").write_text(body + extra)


def best_of(fn, runs: int = 5) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    rg = ensure_rg()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "tree"
        root.mkdir()
        build_tree(root)
        auto = best_of(lambda: run_search(str(root), PATTERN, False))
        pure = best_of(lambda: run_search(str(root), PATTERN, False, use_rg=False))
        pure_d = best_of(lambda: run_search(str(root), PYTHON_ONLY_PATTERN, False))
        grep = best_of(lambda: subprocess.run(["grep", "-rnE", PATTERN, str(root)], capture_output=True))
        rows = [
            ("search (auto: rg when portable)", auto),
            ("search (pure Python)", pure),
            (r"search (\d pattern, Python)", pure_d),
            ("grep -rn", grep),
        ]
        if rg is None:
            print("rg is not available; ratios against rg cannot be computed")
            for name, value in rows:
                print(f"{name:34} {value * 1000:8.1f} ms")
            return 1
        rg_time = best_of(lambda: subprocess.run([rg, "-n", "--no-heading", PATTERN, str(root)], capture_output=True))
    print(f"{'measure':34} {'time':>10} {'vs rg':>7} {'target':>7}  result")
    print(f"{'rg -n':34} {rg_time * 1000:8.1f} ms {1.0:7.2f}")
    for name, value in rows:
        ratio = value / rg_time
        verdict = ("PASS" if ratio <= TARGET_RATIO else "FAIL") if name.startswith("search (auto") else "info"
        print(f"{name:34} {value * 1000:8.1f} ms {ratio:7.2f} {TARGET_RATIO:7.1f}  {verdict}")
    return 0 if auto / rg_time <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
