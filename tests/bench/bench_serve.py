"""Benchmark `openheim serve`: ACP prompt cost over /acp versus stdio, and how many sockets it holds.

Run: .venv/bin/python tests/bench/bench_serve.py [--quick] [--load]   (--load: section 4 only)

1. Prompt overhead: the same prompts, interleaved, over `openheim acp` (stdio) and over `/acp` of
   `openheim serve` (both subprocesses, one fake model in this process); medians and their ratio.
2. Sockets held: N idle sockets (each initialized, with a session) while one client prompts; the p95
   overhead of its prompts, for growing N.
3. Sockets prompting at once: N sockets each prompting in a loop; the p95 overhead of every prompt.
For 2 and 3 the fake model runs in its own process and the clients are asyncio websockets in this one,
so the client side costs one thread. Overhead = prompt round trip minus the fake model's own time for
a request of that size measured alone (so queueing inside the fake model under load counts against us).
4. Under load: 50 sockets, each with a session, send one prompt at the same moment; p50 and p99 of the time
   to each one's first agent_message_chunk, and serve's peak RSS (VmHWM).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests/: the ACP harness and the fake model
from acp_wire import AcpWire
from cli_helpers import write_config
from common import ROOT, table
from fake_llm import FakeLLMServer

QUICK = "--quick" in sys.argv
PROMPTS = 100 if QUICK else 300
HELD = [50, 200] if QUICK else [100, 250, 500, 1000]
ACTIVE = [1, 4, 16] if QUICK else [1, 2, 4, 8, 16, 32, 64]
ACTIVE_SECONDS = 2.0 if QUICK else 4.0
LIMIT_MS = 50.0


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 20 else max(values)


TOKEN = "bench-serve-token-0123456789"  # serve always wants one; the clients send it as a Bearer header
AUTH = {"Authorization": f"Bearer {TOKEN}"}


def start_serve(project: Path) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OPENHEIM_SERVE_TOKEN": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "openheim", "serve", "--port", "0"],
        cwd=project,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = proc.stderr.readline()
    match = re.search(r"listening on http://127\.0\.0\.1:(\d+)/", line)
    if not match:
        raise RuntimeError(f"serve did not start: {line}{proc.stderr.read()}")
    return proc, int(match.group(1))


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    try:
        proc.wait(20)
    except subprocess.TimeoutExpired:
        proc.kill()


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """Resident memory now (VmRSS) or at its peak so far (VmHWM)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    return 0.0


def fake_alone(base_url: str, body: bytes, runs: int = 50) -> float:
    """Median seconds the fake model takes for ``body`` with nothing else running."""
    import http.client
    from urllib.parse import urlsplit

    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.hostname, url.port)
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        conn.request("POST", url.path + "/chat/completions", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
        times.append(time.perf_counter() - start)
    conn.close()
    return statistics.median(times)


# --- 1. /acp versus stdio -------------------------------------------------------------


class SyncSocket:
    def __init__(self, port: int) -> None:
        from websockets.sync.client import connect

        self.ws = connect(f"ws://127.0.0.1:{port}/acp", compression=None, additional_headers=AUTH).__enter__()
        self.next_id = 0

    def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        while True:
            frame = json.loads(self.ws.recv())
            if frame.get("id") == self.next_id and "method" not in frame:
                return frame


def overhead_vs_stdio(project: Path, srv: FakeLLMServer) -> list[tuple]:
    proc, port = start_serve(project)
    wire = AcpWire(validate=False)
    sock = SyncSocket(port)
    try:
        wire.initialize()
        sock.call("initialize", {"protocolVersion": 1})
        stdio_sid = wire.new_session(project)
        ws_sid = sock.call("session/new", {"cwd": str(project), "mcpServers": []})["result"]["sessionId"]
        stdio, over_ws = [], []
        for i in range(PROMPTS):
            start = time.perf_counter()
            assert wire.prompt(stdio_sid, f"hello {i}")[0]["result"]["stopReason"] == "end_turn"
            stdio.append(time.perf_counter() - start)
            start = time.perf_counter()
            prompt = {"sessionId": ws_sid, "prompt": [{"type": "text", "text": f"hello {i}"}]}
            assert sock.call("session/prompt", prompt)["result"]["stopReason"] == "end_turn"
            over_ws.append(time.perf_counter() - start)
    finally:
        sock.ws.close()
        wire.close()
        stop(proc)
    sent = [r.raw for r in srv.requests]
    own = statistics.median(
        [fake_alone(srv.base_url, sent[len(sent) // 2], 30), fake_alone(srv.base_url, sent[-1], 30)]
    )
    s, w = statistics.median(stdio) * 1000, statistics.median(over_ws) * 1000
    so, wo = s - own * 1000, w - own * 1000
    print(
        f"{PROMPTS} prompts each: stdio median {s:.2f} ms, /acp median {w:.2f} ms, fake model alone "
        f"{own * 1000:.2f} ms; p95 stdio {p95(stdio) * 1000:.2f} ms, /acp {p95(over_ws) * 1000:.2f} ms"
    )
    return [
        ("prompt over /acp vs stdio (median, ratio)", f"{w / s:.2f}x", "<= 1.5x", f"{w / s / 1.5:.2f}", w / s <= 1.5),
        ("  overhead beyond the fake model: stdio (ms)", f"{so:.2f}", "info", "", True),
        ("  overhead beyond the fake model: /acp (ms)", f"{wo:.2f}", "info", "", True),
        ("  overhead ratio /acp : stdio", f"{wo / so:.2f}x", "info", "", True),
    ]


# --- 2 and 3. many sockets ------------------------------------------------------------------


class Client:
    """One asyncio socket speaking ACP."""

    def __init__(self, ws) -> None:
        self.ws, self.next_id, self.sid = ws, 0, None

    async def call(self, method: str, params: dict) -> dict:
        self.next_id += 1
        await self.ws.send(json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}))
        while True:
            frame = json.loads(await self.ws.recv())
            if frame.get("id") == self.next_id and "method" not in frame:
                return frame

    async def open(self, project: Path) -> Client:
        await self.call("initialize", {"protocolVersion": 1})
        self.sid = (await self.call("session/new", {"cwd": str(project), "mcpServers": []}))["result"]["sessionId"]
        return self

    async def prompt(self, text: str) -> float:
        start = time.perf_counter()
        frame = await self.call("session/prompt", {"sessionId": self.sid, "prompt": [{"type": "text", "text": text}]})
        assert frame.get("result", {}).get("stopReason") == "end_turn", frame
        return time.perf_counter() - start


async def connect_many(port: int, project: Path, count: int, batch: int = 50) -> list[Client]:
    from websockets.asyncio.client import connect

    clients: list[Client] = []
    while len(clients) < count:
        n = min(batch, count - len(clients))
        sockets = await asyncio.gather(
            *(
                connect(
                    f"ws://127.0.0.1:{port}/acp",
                    compression=None,
                    open_timeout=60,
                    additional_headers=AUTH,
                    ping_interval=None,
                )
                for _ in range(n)
            )
        )
        clients += await asyncio.gather(*(Client(ws).open(project) for ws in sockets))
    return clients


async def held(port: int, project: Path, own: float, pid: int) -> list[tuple]:
    rows, best, clients = [], 0, []
    try:
        for n in HELD:
            try:
                clients += await connect_many(port, project, n - len(clients))
            except Exception as e:
                print(f"  could not open {n} sockets: {type(e).__name__}: {e}")
                break
            await asyncio.sleep(0.5)
            active = await Client(await _connect(port)).open(project)  # a fresh session: the same history each time
            times = [await active.prompt(f"held {n} {i}") for i in range(60)]
            await active.ws.close()
            over = (p95(times) - own) * 1000
            print(
                f"  {n} idle sockets held: p95 prompt overhead {over:.2f} ms, median "
                f"{(statistics.median(times) - own) * 1000:.2f} ms, serve RSS {rss_mib(pid):.0f} MiB"
            )
            if over < LIMIT_MS:
                best = n
    finally:
        for c in clients:
            await c.ws.close()
    rows.append(
        (f"idle sockets held, p95 overhead < {LIMIT_MS:.0f} ms", f">= {best}", f">= {HELD[0]}", "", best >= HELD[0])
    )
    return rows


async def _connect(port: int):
    from websockets.asyncio.client import connect

    return await connect(f"ws://127.0.0.1:{port}/acp", compression=None, ping_interval=None, additional_headers=AUTH)


async def active(port: int, project: Path, own: float) -> list[tuple]:
    best = 0
    for n in ACTIVE:
        clients = await connect_many(port, project, n)
        times: list[float] = []
        deadline = time.perf_counter() + ACTIVE_SECONDS

        async def loop(c: Client, deadline: float = deadline, times: list[float] = times) -> None:
            i = 0
            while time.perf_counter() < deadline:
                times.append(await c.prompt(f"busy {i}"))
                i += 1

        await asyncio.gather(*(loop(c) for c in clients))
        for c in clients:
            await c.ws.close()
        over = (p95(times) - own) * 1000
        rate = len(times) / ACTIVE_SECONDS
        print(
            f"  {n} sockets prompting at once: {rate:.0f} prompts/s, p95 overhead {over:.2f} ms, median "
            f"{(statistics.median(times) - own) * 1000:.2f} ms"
        )
        if over < LIMIT_MS:
            best = n
    return [(f"sockets prompting at once, p95 < {LIMIT_MS:.0f} ms", f"{best}", ">= 4", "", best >= 4)]


LOAD_CLIENTS = 50


async def first_tokens(port: int, project: Path, count: int) -> list[float]:
    """Seconds from sending each socket's prompt (all at once) to its first agent_message_chunk."""
    clients = await connect_many(port, project, count)
    start = asyncio.Event()

    async def one(c: Client) -> float:
        await start.wait()
        sent = time.perf_counter()
        c.next_id += 1
        await c.ws.send(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": c.next_id,
                    "method": "session/prompt",
                    "params": {"sessionId": c.sid, "prompt": [{"type": "text", "text": "load"}]},
                }
            )
        )
        first = None
        while True:
            frame = json.loads(await c.ws.recv())
            update = frame.get("params", {}).get("update", {})
            if first is None and update.get("sessionUpdate") == "agent_message_chunk":
                first = time.perf_counter() - sent
            if frame.get("id") == c.next_id and "method" not in frame:
                assert frame.get("result", {}).get("stopReason") == "end_turn", frame
                return first if first is not None else time.perf_counter() - sent

    tasks = [asyncio.ensure_future(one(c)) for c in clients]
    await asyncio.sleep(0.2)
    start.set()
    times = await asyncio.gather(*tasks)
    for c in clients:
        await c.ws.close()
    return list(times)


def under_load(project: Path, home: Path) -> list[tuple]:
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE_MODEL, str(ROOT / "tests" / "support")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    write_config(home, fake.stdout.readline().strip())
    proc, port = start_serve(project)
    try:
        times = asyncio.run(first_tokens(port, project, LOAD_CLIENTS))
        peak = rss_mib(proc.pid, "VmHWM")
    finally:
        stop(proc)
        fake.stdin.close()
        fake.wait(10)
    cuts = statistics.quantiles(times, n=100, method="inclusive")  # never beyond the largest time
    p50, p99 = statistics.median(times) * 1000, cuts[98] * 1000
    print(
        f"  {LOAD_CLIENTS} sockets prompting at the same moment: first token p50 {p50:.0f} ms, p99 {p99:.0f} ms, "
        f"max {max(times) * 1000:.0f} ms; serve peak RSS {peak:.0f} MiB"
    )
    return [
        (
            f"{LOAD_CLIENTS} clients at once: first token p99 / p50",
            f"{p99:.0f}/{p50:.0f} ms",
            "<= 3x",
            f"{p99 / p50:.2f}x",
            p99 <= 3 * p50,
        ),
        (f"{LOAD_CLIENTS} clients at once: serve peak RSS", f"{peak:.0f} MiB", "<= 120 MB", "", peak * 1.048576 <= 120),
    ]


FAKE_MODEL = """
import sys, time
sys.path.insert(0, sys.argv[1])
from fake_llm import FakeLLMServer
with FakeLLMServer(wire="openai") as srv:
    print(srv.base_url, flush=True)
    sys.stdin.read()
"""


def many_sockets(project: Path, home: Path) -> list[tuple]:
    fake = subprocess.Popen(
        [sys.executable, "-c", FAKE_MODEL, str(ROOT / "tests" / "support")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    base = fake.stdout.readline().strip()
    write_config(home, base)
    history = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i}"} for i in range(40)]
    own = fake_alone(base, json.dumps({"model": "fake-model", "stream": True, "messages": history}).encode(), 50)
    proc, port = start_serve(project)
    try:
        print(f"fake model alone: {own * 1000:.2f} ms per request")
        rows = asyncio.run(held(port, project, own, proc.pid))
        rows += asyncio.run(active(port, project, own))
    finally:
        stop(proc)
        fake.stdin.close()
        fake.wait(10)
    return rows


def main() -> int:
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))  # children inherit it
    home = Path(tempfile.mkdtemp()) / ".openheim"
    home.mkdir()
    project = Path(tempfile.mkdtemp()).resolve()
    os.environ.update(
        OPENHEIM_HOME=str(home), HOME=str(home.parent), NO_PROXY="127.0.0.1,localhost", PYTHONPATH=str(ROOT)
    )
    if "--load" in sys.argv:
        rows = under_load(project, home)
        table(rows)
        return 0 if all(r[4] for r in rows) else 1
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, srv.base_url)
        rows = overhead_vs_stdio(project, srv)
    rows += many_sockets(project, home)
    rows += under_load(project, home)
    table(rows)
    return 0 if all(r[4] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
