"""Shared helpers for benchmarks: timing subprocesses, peak RSS, a printed table."""
from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests"))


def env_with_home(home: Path) -> dict:
    return {**os.environ, "OPENHEIM_HOME": str(home), "HOME": str(home), "PYTHONPATH": str(ROOT),
            "NO_PROXY": "127.0.0.1,localhost"}


def time_command(argv: list[str], env: dict | None = None, runs: int = 7, cwd: Path | None = None) -> tuple[float, int]:
    """Median wall seconds and max peak RSS (KiB) of a command over ``runs`` runs."""
    times, rss = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        rss = max(rss, usage.ru_maxrss)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{argv} failed: {proc.stderr.read().decode()[-500:]}")
        proc.stderr.close()
    return statistics.median(times), rss


def table(rows: list[tuple[str, str, str, str, bool]]) -> None:
    """Print name, measured, target, ratio, pass."""
    print(f"{'benchmark':<48} {'measured':>14} {'target':>14} {'ratio':>8}  ok")
    for name, measured, target, ratio, ok in rows:
        print(f"{name:<48} {measured:>14} {target:>14} {ratio:>8}  {'yes' if ok else 'NO'}")
