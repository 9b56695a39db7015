"""Benchmark: O(1) log appends, loading a 10,000-message conversation, ContextFitter on 10,000 messages.

Run: .venv/bin/python tests/bench/bench_history.py
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from openheim.conversation.history import Conversation, HistoryManager
from openheim.core.context import ContextFitter
from openheim.core.models import Message, TextBlock, ThinkingBlock, Tool, ToolUseBlock

BIG = 10_000
SAMPLES = 31


def sample_message(i: int) -> Message:
    """A realistic mix: user prompts, assistant tool calls with thinking, mid-sized tool results, answers."""
    kind = i % 4
    if kind == 0:
        return Message.user(f"please look at file number {i} and tell me what it does " * 2)
    if kind == 1:
        return Message(
            "assistant",
            [
                ThinkingBlock("Let me read the file first. " * 4, "sig" * 10),
                TextBlock("Reading it."),
                ToolUseBlock(f"call_{i}", "read_file", f'{{"path": "src/file_{i}.py"}}'),
            ],
        )
    if kind == 2:
        return Message.tool_result(f"call_{i - 1}", "read_file", "def f(x):\n    return x * 2\n" * 40)
    return Message.assistant("The file defines a function that doubles its argument. " * 3)


def timed(fn) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def fill(hm: HistoryManager, conv: Conversation, count: int) -> Conversation:
    """Write ``count`` more lines straight into the log (no fsync per line), then reload."""
    start = len(conv.messages)
    with open(hm.log_path(conv.id), "a", encoding="utf-8") as f:
        f.writelines(sample_message(start + i).to_json() + "\n" for i in range(count))
    return hm.load(conv.id)


def bench_append(hm: HistoryManager) -> tuple[float, float]:
    """Median append time at message ~10 and at message ~10,000, alternating so disk noise hits both alike."""
    small = fill(hm, hm.create(), 10)
    big = fill(hm, hm.create(), BIG)
    small_times, big_times = [], []
    for _i in range(SAMPLES):
        for conv, times in ((small, small_times), (big, big_times)):
            message = sample_message(len(conv.messages))
            conv.messages.append(message)
            times.append(timed(lambda conv=conv, message=message: hm.append_message(conv, message)))
    return statistics.median(small_times), statistics.median(big_times)


def bench_load(hm: HistoryManager) -> float:
    conv = fill(hm, hm.create(), BIG)
    assert len(conv.messages) == BIG
    return statistics.median(timed(lambda: hm.load(conv.id)) for _ in range(7))


def bench_fit() -> tuple[float, int]:
    history = [sample_message(i) for i in range(BIG)]
    tools = [
        Tool(f"tool_{i}", "Does a thing. " * 20, {"type": "object", "properties": {"a": {"type": "string"}}})
        for i in range(15)
    ]
    system = Message.system("You are a general purpose multiprovider LLM agent. " * 50)
    fitter = ContextFitter(200_000)
    dropped = fitter.fit(history, system, tools).dropped
    return statistics.median(timed(lambda: fitter.fit(history, system, tools)) for _ in range(15)), dropped


def row(name: str, value: float, target: float | None, unit: str) -> str:
    if target is None:
        return f"{name:<46} {value:>10.3f} {unit:<3} {'-':>12} {'-':>6}  info"
    ratio = value / target
    verdict = "pass" if ratio <= 1.0 else "FAIL"
    return f"{name:<46} {value:>10.3f} {unit:<3} {target:>8.3f} {unit:<3} {ratio:>6.2f}  {verdict}"


def main() -> int:
    print(f"interpreter: {sys.executable}")
    with tempfile.TemporaryDirectory() as tmp:
        hm = HistoryManager(Path(tmp) / "history")
        at_10, at_10k = bench_append(hm)
        load = bench_load(hm)
    fit, dropped = bench_fit()
    rows = [
        row("append msg ~10 (median)", at_10 * 1000, None, "ms"),
        row("append msg ~10,000 (median)", at_10k * 1000, None, "ms"),
        row("append cost ratio 10,000 vs 10", at_10k / at_10, 1.3, "x"),
        row(f"load {BIG:,}-message conversation", load * 1000, 150, "ms"),
        row(f"ContextFitter.fit, {BIG:,} msgs ({dropped} cut)", fit * 1000, 20, "ms"),
    ]
    print(f"{'measure':<46} {'value':>14} {'target':>12} {'ratio':>6}  result")
    print("\n".join(rows))
    return 1 if any(r.endswith("FAIL") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
