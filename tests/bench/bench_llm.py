"""Benchmark: per-chunk stream parsing cost per provider, and a 20,000-chunk reply end to end vs curl -N.

Run: .venv/bin/python tests/bench/bench_llm.py
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from common import table
from fake_llm import FakeLLMServer, Reply
from fake_wires import RENDERERS, StreamCtx

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.anthropic import AnthropicClient, MessagesStreamParser
from openheim.core.llm.gemini import GeminiClient, GenerateStreamParser
from openheim.core.llm.openai import ChatStreamParser, OpenAIClient
from openheim.core.llm.sse import iter_sse, parse_json
from openheim.core.models import Message
from openheim.core.turn_context import CancelToken

CHUNKS = 20_000
PARSE_TARGET_US = 30.0
E2E_TARGET = 1.5
RUNS = 5
WIRES = {
    "openai": (OpenAIClient, ChatStreamParser, "/chat/completions", "openai_compatible"),
    "anthropic": (AnthropicClient, MessagesStreamParser, "/messages", "anthropic"),
    "gemini": (GeminiClient, GenerateStreamParser, "/models/m:streamGenerateContent?alt=sse", "gemini"),
}
REPLY = Reply(text="word " * CHUNKS, chunk_size=5, usage=(10, CHUNKS))


def stream_bytes(wire: str) -> bytes:
    events = RENDERERS[wire](REPLY, StreamCtx("m", True, 10))
    return b"".join(data for data, _ in events)


def parse_cost_us(wire: str) -> tuple[float, int]:
    """Median µs per content chunk for bytes → SSE events → JSON → parser → on_chunk, in memory."""
    raw = stream_bytes(wire)
    pieces = [raw[i : i + 16384] for i in range(0, len(raw), 16384)]
    parser_cls = WIRES[wire][1]
    times, count = [], 0
    for _ in range(RUNS):
        parser, seen = parser_cls(), []
        start = time.perf_counter()
        for _event, data in iter_sse(iter(pieces)):
            if data == "[DONE]":
                parser.feed_done()
                break
            payload = parse_json(data)
            for chunk in parser.feed(payload):
                seen.append(chunk)
        parser.finish()
        times.append(time.perf_counter() - start)
        count = len(seen)
    return statistics.median(times) / count * 1e6, count


def body_for(wire: str) -> dict:
    if wire == "gemini":
        return {"contents": [{"role": "user", "parts": [{"text": "go"}]}]}
    return {"model": "m", "messages": [{"role": "user", "content": "go"}], "stream_options": {"include_usage": True}}


def client_seconds(base_url: str, wire: str) -> float:
    cls, _, _, kind = WIRES[wire]
    client = cls(AgentConfig("bench", kind, base_url, "", "m"))
    times = []
    for _ in range(RUNS):
        count = 0

        def on_chunk(_c: object) -> None:
            nonlocal count
            count += 1

        start = time.perf_counter()
        client.stream([Message.user("go")], [], on_chunk, CancelToken())
        times.append(time.perf_counter() - start)
        assert count == CHUNKS, count
    return statistics.median(times)


def curl_seconds(base_url: str, wire: str, curl: str) -> float:
    argv = [
        curl,
        "-sN",
        "-o",
        "/dev/null",
        "-X",
        "POST",
        base_url + WIRES[wire][2],
        "-H",
        "Content-Type: application/json",
        "-d",
        json.dumps(body_for(wire)),
    ]
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run(argv, check=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def serve(wire: str, burst: bool) -> None:
    """Child mode: answer every request with the 20,000-chunk reply until stdin closes."""

    class Always(FakeLLMServer):
        def next_item(self, body: object) -> Reply:
            return REPLY

    with Always(wire, burst=burst) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


def e2e_row(wire: str, burst: bool, curl: str | None) -> tuple[str, str, str, str, bool]:
    """Client vs curl against a server in its own process (so the two never share a GIL)."""
    argv = [sys.executable, __file__, "--serve", wire] + (["--burst"] if burst else [])
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        base_url = child.stdout.readline().strip()
        ours = client_seconds(base_url, wire)
        theirs = curl_seconds(base_url, wire, curl) if curl else None
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    mode = "32 KiB bursts (info)" if burst else "one write per event"
    name = f"(in-process) {wire}: {CHUNKS} chunks, {mode}"
    if theirs is None:
        return name, f"{ours * 1000:.0f} ms", "curl missing", "-", True
    ratio = ours / theirs
    target = "info" if burst else f"<= {E2E_TARGET}x"
    return name, f"{ours * 1000:.0f}/{theirs * 1000:.0f} ms", target, f"{ratio:.2f}", burst or ratio <= E2E_TARGET


def main() -> int:
    rows = []
    for wire in WIRES:
        us, count = parse_cost_us(wire)
        rows.append(
            (
                f"(in-process) {wire}: parse µs/chunk ({count} chunks)",
                f"{us:.1f} µs",
                f"<= {PARSE_TARGET_US:.0f} µs",
                f"{us / PARSE_TARGET_US:.2f}",
                us <= PARSE_TARGET_US,
            )
        )
    curl = shutil.which("curl")
    for wire in WIRES:
        for burst in (False, True):
            rows.append(e2e_row(wire, burst, curl))
    table(rows)
    print("end-to-end rows: client ms / curl -N ms reading the same stream from a fake server process")
    if curl is None:
        print("note: curl not found; the end-to-end rows show the client time only")
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve(sys.argv[2], "--burst" in sys.argv)
    else:
        sys.exit(main())
