"""Benchmark: checkpoints of a 10,000-file root (openheim's content-addressed store next to a private git object
store, measured side by side), undo of a 100-file turn, and what compaction costs and saves.

Run: .venv/bin/python tests/bench/bench_checkpoints.py
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from openheim.checkpoints.snapshot import changes_since, take
from openheim.checkpoints.store import CheckpointStore
from openheim.checkpoints.turn import TurnCheckpoint
from openheim.checkpoints.undo import apply_undo, plan_undo
from openheim.config.long_sessions import CheckpointConfig

FILES, DIRS = 10_000, 100
RUNS = 11
CAP, MAX_FILES = 10 * 1024 * 1024, 100_000


def make_root(root: Path) -> None:
    for d in range(DIRS):
        sub = root / f"pkg{d:03d}"
        sub.mkdir(parents=True)
        for f in range(FILES // DIRS):
            (sub / f"mod{f:03d}.py").write_text(f"# module {d}/{f}\n" + "def f(x):\n    return x + 1\n" * 40)
    (root / ".gitignore").write_text("*.pyc\nbuild/\n")


def median_ms(fn, runs: int = RUNS) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def once_ms(fn) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


def git_store(root: Path, store: Path) -> None:
    env = {**os.environ, "GIT_DIR": str(store), "GIT_WORK_TREE": str(root), "GIT_INDEX_FILE": str(store / "index")}
    subprocess.run(["git", "add", "-A"], env=env, check=True, capture_output=True)
    subprocess.run(["git", "write-tree"], env=env, check=True, capture_output=True)


def bench_checkpoint(base: Path) -> list[tuple[str, float, str]]:
    root = base / "root"
    make_root(root)
    time.sleep(0.05)  # older than the racy window, as files are when a turn starts
    data = base / "data"
    first = once_ms(lambda: take(CheckpointStore(data), str(root), CAP, MAX_FILES))
    take(CheckpointStore(data), str(root), CAP, MAX_FILES)  # settles the entries hashed within the racy window
    store = CheckpointStore(data)
    snapshot = take(store, str(root), CAP, MAX_FILES)
    git_dir = base / "git"
    subprocess.run(["git", "init", "-q", "--bare", str(git_dir)], check=True)
    git_first = once_ms(lambda: git_store(root, git_dir))
    # side by side, alternating, so the machine's load hits every contender alike
    runs: dict[str, list[float]] = {"cold": [], "warm": [], "diff": [], "git": [], "stat": []}
    for _ in range(RUNS):
        runs["cold"].append(once_ms(lambda: take(CheckpointStore(data), str(root), CAP, MAX_FILES)))
        runs["warm"].append(once_ms(lambda: take(store, str(root), CAP, MAX_FILES)))
        runs["diff"].append(once_ms(lambda: changes_since(snapshot, CAP, MAX_FILES)))
        runs["git"].append(once_ms(lambda: git_store(root, git_dir)))
        runs["stat"].append(once_ms(lambda: stat_only(root)))
    m = {k: statistics.median(v) for k, v in runs.items()}
    blobs = sum(f.stat().st_size for f in (data / "blobs").rglob("*") if f.is_file())
    git_bytes = sum(f.stat().st_size for f in git_dir.rglob("*") if f.is_file())
    return [
        ("first checkpoint, 10k files (copies every file)", first, f"store {blobs / 1e6:.1f} MB"),
        ("checkpoint, nothing changed (new process)", m["cold"], f"target <= 100 ms; {m['cold'] / m['git']:.2f}x git"),
        ("checkpoint, nothing changed (same process)", m["warm"], f"target <= 100 ms; {m['warm'] / m['git']:.2f}x git"),
        ("post-turn diff, nothing changed", m["diff"], ""),
        ("git object store: first add + write-tree", git_first, f"store {git_bytes / 1e6:.1f} MB"),
        ("git object store: nothing changed", m["git"], "git add -A + write-tree (2 processes)"),
        ("floor: os.scandir + stat of every file", m["stat"], "no ignore rules, no comparison"),
    ]


def stat_only(root: Path) -> int:
    count, stack = 0, [str(root)]
    while stack:
        for entry in os.scandir(stack.pop()):
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
            else:
                entry.stat(follow_symlinks=False)
                count += 1
    return count


def bench_undo(base: Path) -> list[tuple[str, float, str]]:
    root = base / "undo-root"
    make_root(root)
    time.sleep(0.05)
    store = CheckpointStore(base / "undo-data")
    before = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    turn = TurnCheckpoint(store, CheckpointConfig(), "bench", str(root), 0)
    ensure = once_ms(turn.ensure)
    files = sorted(before)
    for p in files[:60]:
        p.write_text("rewritten by the turn\n")
    for p in files[60:80]:
        p.unlink()
    for i in range(20):
        (root / "added" / f"new{i}.py").parent.mkdir(exist_ok=True)
        (root / "added" / f"new{i}.py").write_text("new\n")
    finish = once_ms(turn.finish)
    start = time.perf_counter()
    plan = plan_undo(store, "bench")
    result = apply_undo(store, plan)
    undo = (time.perf_counter() - start) * 1000
    after = {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}
    exact = after == before and len(result.restored) == 80 and len(result.removed) == 20
    return [
        ("checkpoint before the turn (first, 10k files)", ensure, ""),
        ("recording the turn's 100 changes", finish, ""),
        ("undo of a 100-file turn (plan + restore)", undo, f"target <= 1000 ms; exact: {exact}"),
    ]


def bench_compaction(home: Path) -> list[tuple[str, str]]:
    home.mkdir()
    os.environ["OPENHEIM_HOME"], os.environ["HOME"] = str(home), str(home)
    from cli_helpers import write_config
    from fake_llm import Reply, ToolCall
    from long_helpers import SummarisingServer

    from openheim.client import OpenheimClient

    window = 32_000
    (home / "work").mkdir()
    (home / "work" / "big.txt").write_text("lorem ipsum dolor sit amet\n" * 250)  # ~6.5 KB per read
    with SummarisingServer() as srv:
        write_config(home, srv.base_url, provider_extra=f"context_window = {window}")
        with OpenheimClient.builder().build() as client:
            session = client.new_session(home / "work")
            for turn in range(60):
                seen = len(srv.requests)
                srv.enqueue(
                    Reply(tool_calls=[ToolCall("read_file", {"path": "big.txt"}, id=f"c{turn}")]),
                    Reply(text=f"read it, turn {turn}"),
                )
                before = len(srv.summary_requests)
                session.prompt(f"turn {turn}: read big.txt again")
                if len(srv.summary_requests) > before:
                    calls = len(srv.requests) - seen
                    turn_requests = srv.requests[seen:]
                    at = next(i for i, r in enumerate(turn_requests) if r.body is srv.summary_requests[-1])
                    peak = max(len(r.raw) for r in srv.requests[: seen + at])
                    compacted = len(turn_requests[at + 1].raw)
                    return [
                        ("model calls in the compacting turn", f"{calls} (2 without compaction)"),
                        ("largest request before compaction", f"{peak / 4 / window:.0%} of the window"),
                        (
                            "first request after compaction",
                            f"{compacted / 4 / window:.0%} of the window "
                            f"({compacted} bytes ~ {compacted // 4} tokens; "
                            "target <= 30%)",
                        ),
                    ]
    return [("compaction", "did not happen")]


def main() -> None:
    base = Path(tempfile.mkdtemp(prefix="bench-checkpoints-"))
    try:
        rows = bench_checkpoint(base) + bench_undo(base)
        print(f"{'benchmark':<52} {'ms':>9}  note")
        for name, ms, note in rows:
            print(f"{name:<52} {ms:>9.1f}  {note}")
        print()
        for name, figure in bench_compaction(base / "home"):
            print(f"{name:<52} {figure}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
