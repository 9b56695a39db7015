"""Start-up, one short prompt end to end, and per-chunk overhead of the SSE → queue → stdout path."""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from cli_helpers import write_config
from common import compare, env_with_home, openheim_argv, table, time_command
from fake_llm import FakeLLMServer, Reply

PY = sys.executable
CHUNKS = 20_000


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(wire="openai") as srv:
        home = Path(tmp)
        write_config(home, srv.base_url)
        env = env_with_home(home)
        oh = openheim_argv()
        base, version, _ = compare([PY, "-c", "pass"], [*oh, "--version"], env)
        rows.append(("a) openheim --version vs python -c pass", f"{version * 1000:.0f} ms",
                     "<= 3.0x", f"{version / base:.2f}x", version / base <= 3.0))
        floor, prompt, rss = compare([PY, "-c", "import click, requests, sseclient"], [*oh, "run", "hi"], env,
                                     cwd=home)
        rows.append(("b) run 'hi' vs import click,requests,sseclient", f"{prompt * 1000:.0f} ms",
                     "<= 1.5x", f"{prompt / floor:.2f}x", prompt / floor <= 1.5))
        rows.append(("b) run 'hi' peak RSS", f"{rss / 1024:.1f} MB", "<= 45 MB", "", rss / 1024 <= 45))
        text = "x" * CHUNKS
        srv.enqueue(*[Reply(text=text, chunk_size=1) for _ in range(3)])
        many, _ = time_command([*oh, "run", "go"], env, runs=3, cwd=home)
        srv.enqueue(*[Reply(text=text, chunk_size=CHUNKS) for _ in range(3)])
        one, _ = time_command([*oh, "run", "go"], env, runs=3, cwd=home)
        per_chunk = (many - one) / CHUNKS * 1e6
        rows.append((f"c) {CHUNKS} chunks: overhead per chunk", f"{per_chunk:.1f} us", "<= 30 us",
                     f"{per_chunk / 30:.2f}x", per_chunk <= 30))
    table(rows)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(took {time.perf_counter() - start:.1f} s)")
