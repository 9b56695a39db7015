"""MCP costs: importing the SDK's client, `openheim run` start-up with zero vs one stdio server, and the
per-call overhead of an MCP echo tool through the bridge beyond the server's own time.

Run: .venv/bin/python tests/bench/bench_mcp.py
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from cli_helpers import write_config
from common import ROOT, compare, env_with_home, openheim_argv, table
from fake_llm import FakeLLMServer

PY = sys.executable
SDK_SERVER = str(ROOT / "tests" / "mcp_server.py")
RAW_SERVER = str(ROOT / "tests" / "bench" / "raw_mcp_server.py")
CALLS = 400


def import_cost(runs: int = 7) -> float:
    """Median seconds to import the SDK's client modules in a fresh interpreter."""
    code = ("import time; t = time.perf_counter()\n"
            "import mcp.client.session, mcp.client.stdio, mcp.client.streamable_http\n"
            "print(time.perf_counter() - t)")
    return statistics.median(float(subprocess.run([PY, "-c", code], capture_output=True, text=True,
                                                  check=True).stdout) for _ in range(runs))


def toml(name: str, script: str) -> str:
    return f'\n[mcp_servers.{name}]\ncommand = "{PY}"\nargs = ["{script}"]\n'


def startup_rows(home: Path, srv: FakeLLMServer) -> list:
    env = env_with_home(home)
    rows = []
    for label, script in (("raw stdlib server", RAW_SERVER), ("SDK test server", SDK_SERVER)):
        write_config(home, srv.base_url)
        none_cfg = (home / "config.toml").read_text()
        write_config(home, srv.base_url, extra=toml("one", script))
        one_cfg = (home / "config.toml").read_text()
        (home / "none.toml").write_text(none_cfg)
        (home / "one.toml").write_text(one_cfg)
        (home / "config.toml").unlink()
        base, one, rss = compare([*openheim_argv(), "--config", str(home / "none.toml"), "run", "hi"],
                                 [*openheim_argv(), "--config", str(home / "one.toml"), "run", "hi"], env,
                                 runs=7, cwd=home)
        rows.append((f"a) run 'hi': 0 vs 1 stdio ({label})", f"{base * 1000:.0f}/{one * 1000:.0f} ms",
                     "report", f"{one / base:.2f}x", True))
        rows.append((f"a) ... peak RSS with 1 server ({label})", f"{rss / 1024:.1f} MB", "report", "", True))
    return rows


def raw_round_trips(script: str, calls: int) -> float:
    """Median seconds per tools/call echo over the server's own pipes, with a plain sync client (no SDK)."""
    proc = subprocess.Popen([PY, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True, bufsize=1)

    def request(request_id: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == request_id:
                return message

    request(0, "initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                              "clientInfo": {"name": "bench", "version": "1"}})
    proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
    proc.stdin.flush()
    times = []
    for i in range(1, calls + 1):
        start = time.perf_counter()
        request(i, "tools/call", {"name": "echo", "arguments": {"text": "x"}})
        times.append(time.perf_counter() - start)
    proc.stdin.close()
    proc.wait(10)
    return statistics.median(times)


def bridge_calls(script: str, calls: int, tmp: Path) -> float:
    """Median seconds per echo call through openheim: tool set -> McpTool -> bridge -> SDK -> server."""
    from fake_client import ScriptedLlm

    from openheim.client import OpenheimClient
    from openheim.core.turn_context import TurnContext

    client = (OpenheimClient.builder().api_base("http://127.0.0.1:9/v1").api_key("k").data_dir(tmp / "d")
              .llm_factory(lambda cfg: ScriptedLlm([])).mcp_server("s", {"command": PY, "args": [script]}).build())
    with client:
        assert client.mcp_servers(wait=60)[0].connected
        tools, ctx = client.state.runtime_tools(), TurnContext()
        for _ in range(20):
            tools.execute("s__echo", '{"text": "x"}', ctx)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            tools.execute("s__echo", '{"text": "x"}', ctx)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    rows = []
    cost = import_cost()
    rows.append(("import mcp.client.{session,stdio,streamable_http}", f"{cost * 1000:.0f} ms", "report", "", True))
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(wire="openai") as srv:
        rows += startup_rows(Path(tmp), srv)
        for label, script in (("raw stdlib server", RAW_SERVER), ("SDK test server", SDK_SERVER)):
            own = raw_round_trips(script, CALLS)
            through = bridge_calls(script, CALLS, Path(tmp))
            extra = (through - own) * 1000
            rows.append((f"b) echo call, plain pipes ({label})", f"{own * 1000:.2f} ms", "", "", True))
            rows.append((f"b) echo call via bridge ({label})", f"{through * 1000:.2f} ms", "", "", True))
            rows.append((f"b) bridge overhead per call ({label})", f"{extra:.2f} ms", "<= 2 ms",
                         f"{extra / 2:.2f}x", extra <= 2))
    table(rows)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(took {time.perf_counter() - start:.1f} s)")
