"""What a 20-iteration tool loop costs in input tokens against a server that bills like Anthropic's prompt cache.

Each row: one request of `openheim run` (the model asks for list_dir 19 times, then answers); the fake server
(tests/support/caching_anthropic.py) reports plain input, cache reads and cache writes for what the request marked.
Billed = input + 1.25 x writes + 0.1 x reads (Anthropic's prices relative to plain input).
"before" is a regular install of git revision REF (default: the last one with breakpoints only on the system prompt
and the tool list, before rolling breakpoints came), "after" this checkout, in the same run.

Run: .venv/bin/python tests/bench/bench_cost.py [--before REF]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import ROOT, table
from user_install import revision_venv

sys.path.insert(0, str(ROOT / "tests" / "support"))
from caching_anthropic import CachingAnthropic
from cli_helpers import write_config
from fake_llm import Reply, ToolCall

ITERATIONS = 20
BEFORE_ROLLING = "7a08203^"  # the revision before rolling cache breakpoints
TARGET_READ_SHARE = 0.8


def loop_usage(argv: list[str], pythonpath: str = "") -> list[tuple[int, int, int]]:
    """(input, cache read, cache write) of each request of one 20-iteration run of ``argv``."""
    with tempfile.TemporaryDirectory() as tmp, CachingAnthropic() as srv:
        home, work = Path(tmp) / "home", Path(tmp) / "work"
        home.mkdir()
        work.mkdir()
        (work / "AGENTS.md").write_text("Keep answers short and exact.\n" * 150)
        for i in range(5):
            (work / f"file{i}.txt").write_text("x")
        write_config(home, srv.base_url, kind="anthropic")
        srv.enqueue(
            *[Reply(tool_calls=[ToolCall("list_dir", {"path": "."})]) for _ in range(ITERATIONS - 1)],
            Reply(text="done"),
        )
        env = {
            **os.environ,
            "OPENHEIM_HOME": str(home),
            "HOME": str(home),
            "NO_PROXY": "127.0.0.1",
            "PYTHONPATH": pythonpath,
        }
        subprocess.run(
            [*argv, "run", "--max-iterations", str(ITERATIONS), "look"],
            cwd=work,
            env=env,
            check=True,
            capture_output=True,
            stdin=subprocess.DEVNULL,
        )
        return list(srv.billed)


def billed(usage: tuple[int, int, int]) -> float:
    inp, read, written = usage
    return inp + 1.25 * written + 0.1 * read


def main(argv: list[str]) -> int:
    ref = argv[argv.index("--before") + 1] if "--before" in argv else BEFORE_ROLLING
    before = loop_usage([str(revision_venv(ref) / "bin" / "openheim")])
    after = loop_usage([sys.executable, "-m", "openheim"], str(ROOT))
    print(f"{'request':>7} | {'before: input  read  write  read%':>36} | {'after: input  read  write  read%':>36}")
    for i, (b, a) in enumerate(zip(before, after), 1):
        cells = [f"{u[0]:>6} {u[1]:>6} {u[2]:>6} {u[1] / max(1, sum(u)):>6.0%}" for u in (b, a)]
        print(f"{i:>7} | {cells[0]:>36} | {cells[1]:>36}")
    total_before, total_after = sum(map(billed, before)), sum(map(billed, after))
    worst = min(u[1] / max(1, sum(u)) for u in after[2:])
    rows = [
        (
            f"{ITERATIONS}-iteration tool loop: billed input tokens",
            f"{total_after:,.0f}/{total_before:,.0f}",
            "after < before",
            f"{total_after / total_before:.2f}x",
            total_after < total_before,
        ),
        (
            "cache reads from the 3rd request on (lowest share)",
            f"{worst:.0%}",
            f">= {TARGET_READ_SHARE:.0%}",
            "",
            worst >= TARGET_READ_SHARE,
        ),
    ]
    table(rows)
    print(f"billed = input + 1.25 x cache writes + 0.1 x cache reads; before = {ref}, after = this checkout")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
