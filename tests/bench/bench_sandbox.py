"""Benchmark the kernel sandbox around shell commands: what it adds to each command, and what keeping the key
out of /proc/PID/environ costs at start-up (overwrite in place vs re-exec).

Both command paths go through ExecuteCommandTool.execute (the code the model's calls take), alternately, so
machine load hits both. Run: .venv/bin/python tests/bench/bench_sandbox.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]
from common import table

from openheim.core.turn_context import TurnContext
from openheim.sandbox.policy import Sandbox
from openheim.tools.execute_command import ExecuteCommandTool

COMMANDS = 100
TARGET_MS = 15.0


def per_command(tool: ExecuteCommandTool, ctx: TurnContext) -> float:
    start = time.perf_counter()
    tool.execute({"command": "true"}, ctx)
    return time.perf_counter() - start


def command_overhead(root: Path) -> tuple[float, float]:
    """Median seconds of one `true` without and with the sandbox (workspace-write, network off)."""
    ctx = TurnContext(work_dir=root, cwd=root)
    plain, boxed = ExecuteCommandTool(sandbox=Sandbox(mode="off")), ExecuteCommandTool(sandbox=Sandbox())
    for tool in (plain, boxed):  # warm up: page cache, the helper's bytecode cache
        per_command(tool, ctx)
    off, on = [], []
    for _ in range(COMMANDS):
        off.append(per_command(plain, ctx))
        on.append(per_command(boxed, ctx))
    return statistics.median(off), statistics.median(on)


# ctypes is imported first: openheim loads it anyway at start-up (the non-dumpable prctl), so it is not this cost
SCRUB = (
    "import ctypes, time, sys; sys.path.insert(0, {root!r}); from openheim.sandbox.environ import scrub_initial_environ;"
    "t = time.perf_counter(); scrub_initial_environ(['BENCH_KEY']); print(time.perf_counter() - t)"
)


def scrub_cost() -> float:
    """Seconds the in-place overwrite takes (measured inside a process started with the key set)."""
    env = {**os.environ, "BENCH_KEY": "sk-" + "x" * 60}
    times = [
        float(
            subprocess.run(
                [sys.executable, "-c", SCRUB.format(root=str(Path(__file__).resolve().parents[2]))],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            ).stdout
        )
        for _ in range(5)
    ]
    return statistics.median(times)


def reexec_cost() -> float:
    """Seconds a re-exec would add: one more interpreter start up to openheim's first line (`--version` path)."""
    times = []
    for _ in range(9):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "openheim", "--version"], capture_output=True, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        off, on = command_overhead(Path(tmp))
    added_ms = (on - off) * 1000
    scrub, reexec = scrub_cost(), reexec_cost()
    print(
        f"{COMMANDS} x `true` through execute_command: {off * 1000:.1f} ms unsandboxed, {on * 1000:.1f} ms "
        f"sandboxed (median): +{added_ms:.1f} ms per command"
    )
    print(
        f"key out of /proc/PID/environ: overwrite in place {scrub * 1e6:.0f} us; re-exec would add "
        f"{reexec * 1000:.1f} ms per start"
    )
    table(
        [
            (
                "sandbox: ms added per command (median)",
                f"{added_ms:.1f} ms",
                f"<= {TARGET_MS:g} ms",
                f"{on / off:.2f}x",
                added_ms <= TARGET_MS,
            ),
            (
                "key scrub vs re-exec at start-up",
                f"{scrub * 1e6:.0f} us",
                f"< {reexec * 1e6:.0f} us",
                f"{reexec / max(scrub, 1e-9):.0f}x",
                scrub < reexec,
            ),
        ]
    )
    return 0 if added_ms <= TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
