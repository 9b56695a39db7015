"""MCP costs, measured side by side in one run:
  - importing the MCP client (CPU and RSS growth in a fresh interpreter);
  - the first streamed byte of `run hi` with 3 servers (one 3 s slow to start), tool lists remembered, vs no MCP;
  - a server that never answers (remembered as given up on) vs no MCP;
  - how long the process lingers after the answer, with 3 servers vs no MCP;
  - `openheim mcp --tools` with 3 servers vs the slowest one alone (SDK servers; stdlib servers, also against
    the slowest one's own start through plain pipes);
  - a 100 MiB tool result: time to refuse it and RSS growth;
  - `openheim run` start-up with zero vs one stdio server, and the per-call overhead through the bridge.

Run: .venv/bin/python tests/bench/bench_mcp.py  (--start-up: only the rows c, d, e and g)
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
from fake_llm import FakeLLMServer, Reply, ToolCall

PY = sys.executable
SDK_SERVER = str(ROOT / "tests" / "support" / "mcp_server.py")
RAW_SERVER = str(ROOT / "tests" / "bench" / "raw_mcp_server.py")
CALLS = 400


def import_cost(runs: int = 7) -> tuple[float, float]:
    """Median CPU seconds and RSS growth (MiB) of loading the MCP client as openheim does, in a fresh interpreter."""
    code = (
        "import resource, time\n"
        "def rss(): return int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()\n"
        "r, t = rss(), time.process_time()\n"
        "from openheim.mcp.bridge import load_sdk; load_sdk()\n"
        "print(time.process_time() - t, (rss() - r) / 2**20)"
    )
    out = [
        subprocess.run([PY, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
        for _ in range(runs)
    ]
    return statistics.median(float(o[0]) for o in out), statistics.median(float(o[1]) for o in out)


def timed_run(argv: list[str], env: dict, cwd: Path) -> tuple[float, float]:
    """(seconds from exec to the first stdout byte, seconds from the end of stdout's answer to the exit)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    first = proc.stdout.read(1)
    first_at = time.perf_counter()
    rest = b""
    while not rest.endswith(b"\n"):  # the answer is one line; the process may linger after it
        chunk = proc.stdout.read1(4096)
        if not chunk:
            break
        rest += chunk
    answered = time.perf_counter()
    err = proc.stderr.read()
    code = proc.wait()
    ended = time.perf_counter()
    if code != 0 or not first:
        raise RuntimeError(f"{argv[-3:]} failed: {err.decode()[-400:]}")
    return first_at - start, ended - answered


def paired(a: list[str], b: list[str], env: dict, cwd: Path, runs: int = 9) -> tuple[tuple, tuple]:
    """Medians of timed_run for ``a`` and ``b``, run in turn so machine load hits both alike."""
    ra, rb = [], []
    for _ in range(runs):
        ra.append(timed_run(a, env, cwd))
        rb.append(timed_run(b, env, cwd))
    med = lambda rs: tuple(statistics.median(r[i] for r in rs) for i in range(2))
    return med(ra), med(rb)


def slow_start_rows(home: Path, srv: FakeLLMServer) -> list:
    """First byte and exit lag with 3 servers (mcp-server-time, the test server, the test server 3 s slow),
    their tool lists remembered; and with a server that never answers (given up on once)."""
    env = env_with_home(home)
    time_server = str(Path(PY).with_name("mcp-server-time"))
    three = (
        f'\n[mcp_servers.time]\ncommand = "{time_server}"\nargs = []\n'
        + toml("fake", SDK_SERVER)
        + f'\n[mcp_servers.slow]\ncommand = "{PY}"\nargs = ["{SDK_SERVER}", "--delay", "3"]\n'
    )
    mute = f'\n[mcp_servers.mute]\ncommand = "{PY}"\nargs = ["{SDK_SERVER}", "--delay", "600"]\n'
    configs = {
        "none": "",
        "three": "mcp_startup_timeout_secs = 20\n" + three,
        "mute": "mcp_startup_timeout_secs = 1\n" + mute,
    }
    argv = {}
    for label, extra in configs.items():
        write_config(home, srv.base_url, extra=extra)
        (home / f"{label}.toml").write_text((home / "config.toml").read_text())
        argv[label] = [*openheim_argv(), "--config", str(home / f"{label}.toml"), "run", "hi"]
    (home / "config.toml").unlink()
    for label in ("three", "mute"):  # the first session learns the tool lists (or gives up on the mute one)
        timed_run(argv[label], env, home)
    rows = []
    (none_fb, none_exit), (three_fb, three_exit) = paired(argv["none"], argv["three"], env, home)
    ratio = three_fb / none_fb
    rows.append(
        (
            "c) first byte: 3 servers (1 slow, remembered) / none",
            f"{three_fb * 1000:.0f}/{none_fb * 1000:.0f} ms",
            "<= 1.2x",
            f"{ratio:.2f}x",
            ratio <= 1.2,
        )
    )
    lag = three_exit - none_exit
    rows.append(
        (
            "d) exit after the answer: 3 servers - none",
            f"{three_exit * 1000:.0f}-{none_exit * 1000:.0f} ms",
            "<= +100 ms",
            f"{lag * 1000:+.0f}ms",
            lag <= 0.1,
        )
    )
    lags = {"none": [], "three": []}
    for _ in range(7):  # servers running at exit: the model calls a tool first (an MCP one when there are some)
        for label, call in (
            ("none", ToolCall("list_dir", {"path": "."})),
            ("three", ToolCall("fake__echo", {"text": "x"})),
        ):
            srv.enqueue(Reply(tool_calls=[call]), Reply(text="done"))
            lags[label].append(timed_run([*argv[label][:-1], "--approve", "all", "use a tool"], env, home)[1])
    none_exit, three_exit = (statistics.median(lags[k]) for k in ("none", "three"))
    lag = three_exit - none_exit
    rows.append(
        (
            "d) ... after an MCP call (servers up): 3 - none",
            f"{three_exit * 1000:.0f}-{none_exit * 1000:.0f} ms",
            "<= +100 ms",
            f"{lag * 1000:+.0f}ms",
            lag <= 0.1,
        )
    )
    slow_only = f'\n[mcp_servers.slow]\ncommand = "{PY}"\nargs = ["{SDK_SERVER}", "--delay", "3"]\n'
    write_config(home, srv.base_url, extra=slow_only)
    (home / "slow.toml").write_text((home / "config.toml").read_text())
    (home / "config.toml").unlink()
    status = [*openheim_argv(), "--config", "{}", "mcp", "--tools"]
    slow, three = compare(
        [a.replace("{}", str(home / "slow.toml")) for a in status],
        [a.replace("{}", str(home / "three.toml")) for a in status],
        env,
        runs=5,
        cwd=home,
    )[:2]
    rows.append(
        (
            "g) mcp --tools: 3 SDK servers - slowest alone",
            f"{three:.2f}-{slow:.2f} s",
            "<= +0.5 s",
            f"{three - slow:+.2f}s",
            three - slow <= 0.5,
        )
    )
    own = statistics.median(
        own_start([[time_server], [PY, SDK_SERVER], [PY, SDK_SERVER, "--delay", "3"]]) for _ in range(3)
    )
    rows.append(
        (
            "g) ... 3 SDK servers - their own start together",
            f"{three:.2f}-{own:.2f} s",
            "<= +0.5 s",
            f"{three - own:+.2f}s",
            three - own <= 0.5,
        )
    )
    rows += raw_status_rows(home, srv, env, status)
    (none_fb, _), (mute_fb, _) = paired(argv["none"], argv["mute"], env, home)
    ratio = mute_fb / none_fb
    rows.append(
        (
            "e) first byte: a never-answering server / none",
            f"{mute_fb * 1000:.0f}/{none_fb * 1000:.0f} ms",
            "<= 1.2x",
            f"{ratio:.2f}x",
            ratio <= 1.2,
        )
    )
    return rows


def raw_status_rows(home: Path, srv: FakeLLMServer, env: dict, status: list[str]) -> list:
    """`mcp --tools` with 3 stdlib servers, one answering initialize after 3 s: against that one alone (what
    the other two add), and against that server's own start through plain pipes (all openheim adds)."""
    slow = f'\n[mcp_servers.slow]\ncommand = "{PY}"\nargs = ["{RAW_SERVER}", "--delay", "3"]\n'
    for label, extra in (("raw-slow", slow), ("raw-three", toml("a", RAW_SERVER) + toml("b", RAW_SERVER) + slow)):
        write_config(home, srv.base_url, extra=extra)
        (home / f"{label}.toml").write_text((home / "config.toml").read_text())
    (home / "config.toml").unlink()
    alone, three = compare(
        [a.replace("{}", str(home / "raw-slow.toml")) for a in status],
        [a.replace("{}", str(home / "raw-three.toml")) for a in status],
        env,
        runs=5,
        cwd=home,
    )[:2]
    own = statistics.median(own_start([[PY, RAW_SERVER, "--delay", "3"]]) for _ in range(3))
    return [
        (
            "g) mcp --tools: 3 stdlib servers - slowest alone",
            f"{three:.2f}-{alone:.2f} s",
            "<= +0.5 s",
            f"{three - alone:+.2f}s",
            three - alone <= 0.5,
        ),
        (
            "g) ... 3 stdlib servers - the slowest's own start",
            f"{three:.2f}-{own:.2f} s",
            "report",
            f"{three - own:+.2f}s",
            True,
        ),
    ]


def own_start(commands: list[list[str]]) -> float:
    """Seconds from spawning the servers (all at once) until each has answered tools/list, through plain pipes
    with a sync client (no SDK, no openheim): the servers' own start-up, contention between them included."""
    start = time.perf_counter()
    procs = [
        subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
        )
        for argv in commands
    ]

    def send(proc: subprocess.Popen, message: dict) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    for proc in procs:
        send(
            proc,
            {
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "clientInfo": {"name": "bench", "version": "1"},
                },
            },
        )
    for proc in procs:
        while json.loads(proc.stdout.readline()).get("id") != 1:
            pass
        send(proc, {"method": "notifications/initialized"})
        send(proc, {"id": 2, "method": "tools/list", "params": {}})
    for proc in procs:
        while json.loads(proc.stdout.readline()).get("id") != 2:
            pass
    took = time.perf_counter() - start
    for proc in procs:
        proc.stdin.close()
        proc.wait(10)
    return took


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
        base, one, rss = compare(
            [*openheim_argv(), "--config", str(home / "none.toml"), "run", "hi"],
            [*openheim_argv(), "--config", str(home / "one.toml"), "run", "hi"],
            env,
            runs=7,
            cwd=home,
        )
        rows.append(
            (
                f"a) run 'hi': 0 vs 1 stdio ({label})",
                f"{base * 1000:.0f}/{one * 1000:.0f} ms",
                "report",
                f"{one / base:.2f}x",
                True,
            )
        )
        rows.append((f"a) ... peak RSS with 1 server ({label})", f"{rss / 1024:.1f} MB", "report", "", True))
    return rows


def raw_round_trips(script: str, calls: int) -> float:
    """Median seconds per tools/call echo over the server's own pipes, with a plain sync client (no SDK)."""
    proc = subprocess.Popen(
        [PY, script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1
    )

    def request(request_id: int, method: str, params: dict) -> dict:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}) + "\n")
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == request_id:
                return message

    request(
        0,
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}},
    )
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

    client = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .api_key("k")
        .data_dir(tmp / "d")
        .llm_factory(lambda cfg: ScriptedLlm([]))
        .mcp_server("s", {"command": PY, "args": [script]})
        .build()
    )
    with client:
        assert client.mcp_servers(wait=60)[0].connected
        tools, ctx = client.state.services.runtime_tools(), TurnContext()
        for _ in range(20):
            tools.execute("s__echo", '{"text": "x"}', ctx)
        times = []
        for _ in range(calls):
            start = time.perf_counter()
            tools.execute("s__echo", '{"text": "x"}', ctx)
            times.append(time.perf_counter() - start)
    return statistics.median(times)


HOSTILE = str(ROOT / "tests" / "support" / "mcp_hostile_server.py")


def oversized_result(tmp: Path, mib: int = 100) -> tuple[float, float]:
    """Seconds to refuse a ``mib`` MiB tool result (default limit 8 MiB) and the peak RSS growth (MB) it caused,
    through the library in this process."""
    from fake_client import ScriptedLlm

    from openheim.client import OpenheimClient
    from openheim.core.turn_context import TurnContext

    def peak_mb() -> float:
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM"))
        return int(line.split()[1]) / 1000

    client = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .api_key("k")
        .data_dir(tmp / "big")
        .llm_factory(lambda cfg: ScriptedLlm([]))
        .mcp_server("big", {"command": PY, "args": [HOSTILE]})
        .build()
    )
    with client:
        assert client.mcp_servers(wait=60)[0].connected
        tools, ctx = client.state.services.runtime_tools(), TurnContext()
        tools.execute("big__echo", '{"text": "warm"}', ctx)
        before = peak_mb()
        start = time.perf_counter()
        try:
            tools.execute("big__huge", json.dumps({"mib": mib}), ctx)
            raise RuntimeError("the oversized result was not refused")
        except Exception as e:  # the tool error the model would read
            if "was refused" not in str(e):
                raise
        took = time.perf_counter() - start
        return took, peak_mb() - before


def main() -> None:
    if "--start-up" in sys.argv:  # only the rows of MCP start-up off the first token's path (c, d, e, g)
        with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(wire="openai") as srv:
            table(slow_start_rows(Path(tmp), srv))
        return
    rows = []
    cpu, rss = import_cost()
    rows.append(("import the MCP client: CPU", f"{cpu * 1000:.0f} ms", "<= 300 ms", f"{cpu / 0.3:.2f}x", cpu <= 0.3))
    rows.append(("import the MCP client: RSS growth", f"{rss:.1f} MiB", "<= 25 MiB", f"{rss / 25:.2f}x", rss <= 25))
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(wire="openai") as srv:
        took, grew = oversized_result(Path(tmp))
        rows.append(("f) a 100 MiB result refused: time", f"{took:.2f} s", "<= 2 s", f"{took / 2:.2f}x", took <= 2))
        rows.append(("f) ... peak RSS growth", f"{grew:.1f} MB", "<= 50 MB", f"{grew / 50:.2f}x", grew <= 50))
        rows += slow_start_rows(Path(tmp), srv)
        rows += startup_rows(Path(tmp), srv)
        for label, script in (("raw stdlib server", RAW_SERVER), ("SDK test server", SDK_SERVER)):
            own = raw_round_trips(script, CALLS)
            through = bridge_calls(script, CALLS, Path(tmp))
            extra = (through - own) * 1000
            rows.append((f"b) echo call, plain pipes ({label})", f"{own * 1000:.2f} ms", "", "", True))
            rows.append((f"b) echo call via bridge ({label})", f"{through * 1000:.2f} ms", "", "", True))
            rows.append(
                (
                    f"b) bridge overhead per call ({label})",
                    f"{extra:.2f} ms",
                    "<= 2 ms",
                    f"{extra / 2:.2f}x",
                    extra <= 2,
                )
            )
    table(rows)


if __name__ == "__main__":
    start = time.perf_counter()
    main()
    print(f"(took {time.perf_counter() - start:.1f} s)")
