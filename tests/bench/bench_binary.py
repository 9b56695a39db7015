"""The frozen binary (build/dist/openheim) next to a regular install of the same checkout: file size,
`--version` start-up (the very first start, which unpacks the file into the user's cache, and every later
one) and `run` first-token latency against the fake server; each as a ratio to the regular install's figure.

Run: .venv/bin/python tests/bench/bench_binary.py   (build first: bash build/build.sh; the regular install's
venv is the one bench_user.py uses, built on first use)
"""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_user import interleaved, start_server, write_config
from common import ROOT, table
from user_install import user_venv

BINARY = ROOT / "build" / "dist" / "openheim"
RUNS = 11
SIZE_LIMIT_MB = 30
START_LIMIT_S = 0.25


def first_byte(argv: list[str], env: dict, cwd: Path) -> float:
    """Seconds from exec to the first byte on stdout (the first token of `run`); the rest is drained."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(1)
    elapsed = time.perf_counter() - start
    proc.stdout.read()
    err = proc.stderr.read()
    if proc.wait() != 0 or not first:
        raise RuntimeError(f"{argv[:2]} failed: {err.decode()[-400:]}")
    return elapsed


def paired_first_byte(a: list[str], b: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """Median first-byte seconds of ``a`` and ``b``, run in turn so machine load hits both alike."""
    ta, tb = [], []
    for _ in range(RUNS):
        ta.append(first_byte(a, env, cwd))
        tb.append(first_byte(b, env, cwd))
    return statistics.median(ta), statistics.median(tb)


def tree_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()) / 1e6


def site_packages(venv: Path) -> Path:
    return next((venv / "lib").glob("python3*/site-packages"))


def machine() -> str:
    model = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    return (
        f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.release()}, Python {platform.python_version()}"
    )


def main() -> int:
    if not BINARY.is_file():
        print(f"{BINARY} is missing: build it with `bash build/build.sh`", file=sys.stderr)
        return 1
    venv = user_venv()
    installed = str(venv / "bin" / "openheim")
    rows = []
    size = BINARY.stat().st_size / 1e6
    deps = tree_mb(site_packages(venv))
    rows.append(
        (
            "binary size vs the install's site-packages",
            f"{size:.1f}/{deps:.0f} MB",
            f"<= {SIZE_LIMIT_MB} MB",
            f"{size / deps:.2f}x",
            size <= SIZE_LIMIT_MB,
        )
    )
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONUNBUFFERED", "PYTHONPATH")}
        env.update(OPENHEIM_HOME=str(home), HOME=str(home), NO_PROXY="127.0.0.1")
        firsts = []
        for i in range(3):  # each in a new, empty cache: the start that unpacks
            fresh = {**env, "OPENHEIM_CACHE_DIR": str(home / f"cache-{i}")}
            start = time.perf_counter()
            subprocess.run([str(BINARY), "--version"], env=fresh, check=True, capture_output=True)
            firsts.append(time.perf_counter() - start)
        first = statistics.median(firsts)
        rows.append(("first start ever (unpacks once per user)", f"{first * 1000:.0f} ms", "info", "", True))
        subprocess.run([str(BINARY), "--version"], env=env, check=True, capture_output=True)  # unpack for HOME
        frozen, source = interleaved([[str(BINARY), "--version"], [installed, "--version"]], env, home, RUNS)
        rows.append(
            (
                "--version start: binary vs install",
                f"{frozen['wall'] * 1000:.0f}/{source['wall'] * 1000:.0f} ms",
                f"<= {START_LIMIT_S * 1000:.0f} ms",
                f"{frozen['wall'] / source['wall']:.1f}x",
                frozen["wall"] <= START_LIMIT_S,
            )
        )
        rows.append(
            (
                "--version cpu: binary vs install",
                f"{frozen['cpu'] * 1000:.0f}/{source['cpu'] * 1000:.0f} ms",
                "",
                f"{frozen['cpu'] / source['cpu']:.1f}x",
                True,
            )
        )
        server, url = start_server(5)
        try:
            write_config(home, url)
            b, s = paired_first_byte([str(BINARY), "run", "hi"], [installed, "run", "hi"], env, home)
        finally:
            assert server.stdin is not None
            server.stdin.close()
            server.wait(timeout=10)
        rows.append(
            (
                "run first token: binary vs install",
                f"{b * 1000:.0f}/{s * 1000:.0f} ms",
                f"<= {START_LIMIT_S * 1000:.0f} ms more",
                f"{b / s:.2f}x",
                b - s <= START_LIMIT_S,
            )
        )
    table(rows)
    print(f"binary: {BINARY} ({BINARY.stat().st_size} bytes); install: {installed}")
    print(f"machine: {machine()}; load average {os.getloadavg()[0]:.1f} (wall times grow with it, cpu times less)")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
