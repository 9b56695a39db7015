"""Benchmark `openheim acp`: per-prompt overhead, writer throughput, idle RSS.

Run: .venv/bin/python tests/bench/bench_acp.py
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parents[1])]
from acp_wire import AcpWire
from cli_helpers import write_config
from common import ROOT, table
from fake_llm import FakeLLMServer

PROMPTS = 500
UPDATES = 200_000


def server_time(srv: FakeLLMServer, runs: int, body: bytes) -> float:
    """Median seconds the fake server itself takes to answer ``body`` (a request the agent really sent)."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", srv.port)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        conn.request("POST", "/v1/chat/completions", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times)


def prompt_times(wire: AcpWire, project: Path, runs: int) -> tuple[list[float], list[float]]:
    """Seconds per prompt over ACP and through the library in this process, interleaved so noise hits both."""
    from openheim.client import OpenheimClient

    handle = OpenheimClient.builder().build().new_session(project)
    wire.initialize()
    sid = wire.new_session(project)
    acp, library = [], []
    for i in range(runs):
        start = time.perf_counter()
        response, _ = wire.prompt(sid, f"hello {i}")
        acp.append(time.perf_counter() - start)
        assert response["result"]["stopReason"] == "end_turn", response
        start = time.perf_counter()
        handle.prompt(f"hello {i}")
        library.append(time.perf_counter() - start)
    return acp, library


def writer_rate() -> float:
    """session/update lines per second through encode → queue → writer thread → a drained pipe."""
    from openheim.acp.connection import Writer, encode
    from openheim.acp.convert import text_chunk

    read_fd, write_fd = os.pipe()
    counted = threading.Event()

    def drain() -> None:
        lines = 0
        with os.fdopen(read_fd, "rb") as f:
            for _ in f:
                lines += 1
                if lines == UPDATES:
                    counted.set()

    threading.Thread(target=drain, daemon=True).start()
    writer = Writer(os.fdopen(write_fd, "wb", buffering=1 << 16)).start()
    start = time.perf_counter()
    for i in range(UPDATES):
        writer.send_line(
            encode(
                {
                    "jsonrpc": "2.0",
                    "method": "session/update",
                    "params": {
                        "sessionId": "5d0d1e9a-0000-4000-8000-000000000000",
                        "update": text_chunk("agent_message_chunk", f"token {i} "),
                    },
                }
            )
        )
    counted.wait(60)
    elapsed = time.perf_counter() - start
    writer.close()
    return UPDATES / elapsed


def idle_rss_mib(wire: AcpWire) -> float:
    time.sleep(0.5)
    with open(f"/proc/{wire.proc.pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def main() -> int:
    home = Path(tempfile.mkdtemp()) / ".openheim"
    home.mkdir()
    project = Path(tempfile.mkdtemp()).resolve()
    os.environ.update(
        OPENHEIM_HOME=str(home), HOME=str(home.parent), NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT)
    )
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        idle = AcpWire()
        idle.initialize()
        idle.new_session(project)
        rss = idle_rss_mib(idle)
        idle.close()
        wire = AcpWire(validate=False)
        try:
            times, library_runs = prompt_times(wire, project, PROMPTS)
        finally:
            wire.close()
        sent = [r.raw for r in srv.requests]  # the server's own time grows with the history it parses
        own = server_time(srv, 100, sent[len(sent) // 2])
        own_early = server_time(srv, 100, sent[50])
        own_late = server_time(srv, 100, sent[-1])
        library = statistics.median(library_runs)
    per_prompt = statistics.median(times)
    overhead_ms = (per_prompt - own) * 1000
    acp_ms = (per_prompt - library) * 1000
    rate = writer_rate()
    early = (statistics.median(times[:50]) - own_early) * 1000  # short history: the fixed cost of a prompt
    late = (statistics.median(times[-50:]) - own_late) * 1000  # ~1,000 stored messages resent every prompt
    rows = [
        (
            "ACP prompt overhead beyond the fake server (ms)",
            f"{overhead_ms:.2f}",
            "<= 10",
            f"{overhead_ms / 10:.2f}",
            overhead_ms <= 10,
        ),
        (
            "  of which the ACP layer (vs. library prompt) (ms)",
            f"{acp_ms:.2f}",
            "<= 10",
            f"{acp_ms / 10:.2f}",
            acp_ms <= 10,
        ),
        ("  first 50 prompts (short history) (ms)", f"{early:.2f}", "info", "", True),
        ("  last 50 prompts (~1,000-message history) (ms)", f"{late:.2f}", "info", "", True),
        ("writer session/update lines per second", f"{rate:,.0f}", ">= 20,000", f"{20000 / rate:.2f}", rate >= 20000),
        ("idle RSS of openheim acp (MiB)", f"{rss:.1f}", "<= 45", f"{rss / 45:.2f}", rss <= 45),
    ]
    print(
        f"{PROMPTS} prompts: median {per_prompt * 1000:.2f} ms per prompt, p90 "
        f"{statistics.quantiles(times, n=10)[-1] * 1000:.2f} ms; fake server alone {own * 1000:.2f} ms; "
        f"library prompt in-process {library * 1000:.2f} ms"
    )
    table(rows)
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
