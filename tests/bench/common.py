"""Shared helpers for benchmarks: timing subprocesses, peak RSS, a printed table."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "support"))


def env_with_home(home: Path) -> dict:
    return {
        **os.environ,
        "OPENHEIM_HOME": str(home),
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),
        "NO_PROXY": "127.0.0.1,localhost",
    }


def time_command(argv: list[str], env: dict | None = None, runs: int = 7, cwd: Path | None = None) -> tuple[float, int]:
    """Median wall seconds and max peak RSS (KiB) of a command over ``runs`` runs."""
    times, rss = [], 0
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.Popen(
            argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        _, status, usage = os.wait4(proc.pid, 0)
        times.append(time.perf_counter() - start)
        rss = max(rss, usage.ru_maxrss)
        if os.waitstatus_to_exitcode(status) != 0:
            raise RuntimeError(f"{argv} failed: {proc.stderr.read().decode()[-500:]}")
        proc.stderr.close()
    return statistics.median(times), rss


def openheim_argv() -> list[str]:
    """The installed console script when there is one (what users run), else ``python -m openheim``."""
    script = Path(sys.executable).with_name("openheim")
    return [str(script)] if script.exists() else [sys.executable, "-m", "openheim"]


def compare(a: list[str], b: list[str], env: dict, runs: int = 9, cwd: Path | None = None) -> tuple[float, float, int]:
    """Median seconds of ``a`` and ``b`` measured alternately (so machine load hits both), and b's peak RSS."""
    ta, tb, rss = [], [], 0
    for _ in range(runs):
        t, _ = time_command(a, env, runs=1, cwd=cwd)
        ta.append(t)
        t, r = time_command(b, env, runs=1, cwd=cwd)
        tb.append(t)
        rss = max(rss, r)
    return statistics.median(ta), statistics.median(tb), rss


def table(rows: list[tuple[str, str, str, str, bool]]) -> None:
    """Print name, measured, target, ratio, pass."""
    print(f"{'benchmark':<48} {'measured':>14} {'target':>14} {'ratio':>8}  ok")
    for name, measured, target, ratio, ok in rows:
        print(f"{name:<48} {measured:>14} {target:>14} {ratio:>8}  {'yes' if ok else 'NO'}")
