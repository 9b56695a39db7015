"""What a user pays, rebased on the floor of our own stack: a regular (non-editable) install in its own venv,
whole processes from exec to exit, output to a pipe, each pair of commands run back to back in alternating order
(so machine load hits both alike) and compared by the median of the per-pair CPU ratios.

The floor is tests/bench/floor.py: the same streaming prompt written with only the public APIs of click,
requests and sseclient-py. Rows: `run hi` / floor, a 20,000-chunk stream / floor, `--version` / `python -c
pass`, `run hi` with one MCP server (mcp-server-time, when installed) / without, peak RSS of each, and the
`python -X importtime` profile of `run hi` with its module count.

Run: .venv/bin/python tests/bench/bench_user.py [--before REF] [--venv-name NAME]   (the first run builds the venv:
about a minute; --before REF adds the same rows for a regular install of git revision REF, measured in the same run;
--venv-name keeps this checkout's install apart from another checkout's, default openheim-bench-venv)
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

from common import ROOT, table
from user_install import revision_venv, user_venv

CHUNKS = 20_000
RUNS = 9


def run_piped(argv: list[str], env: dict, cwd: Path | None = None) -> tuple[float, float, int]:
    """(wall s, cpu s, peak RSS KiB) of one run whose stdout is a pipe this process drains."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    while proc.stdout.read(65536):
        pass
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.stdout.close()
    proc.stderr.close()
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"{argv[:3]} failed: {err.decode()[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss


def paired(argvs: list[list[str]], env: dict, cwd: Path | None = None, runs: int = RUNS) -> list[dict]:
    """Each command's medians (wall, cpu) and peak RSS; ``cpu_ratio``/``wall_ratio``: the median over runs of
    its figure divided by the first command's in the same round (the order rotates every round)."""
    n = len(argvs)
    walls, cpus, rss = [[] for _ in argvs], [[] for _ in argvs], [0] * n
    for round_ in range(runs):
        for k in range(n):
            i = (k + round_) % n
            w, c, r = run_piped(argvs[i], env, cwd)
            walls[i].append(w)
            cpus[i].append(c)
            rss[i] = max(rss[i], r)
    med = statistics.median
    return [
        {
            "wall": med(w),
            "cpu": med(c),
            "rss_kib": r,
            "cpu_ratio": med(x / y for x, y in zip(c, cpus[0])),
            "wall_ratio": med(x / y for x, y in zip(w, walls[0])),
        }
        for w, c, r in zip(walls, cpus, rss)
    ]


def ratio_row(name: str, base: dict, m: dict, target: float) -> tuple[str, str, str, str, bool]:
    measured = f"{m['cpu'] * 1000:.0f}/{base['cpu'] * 1000:.0f} ms cpu"
    shown = f"{m['cpu_ratio']:.2f}x (wall {m['wall_ratio']:.2f}x)"
    return name, measured, f"<= {target}x", shown, m["cpu_ratio"] <= target


def ratio(m: dict) -> str:
    return f"{m['cpu'] * 1000:.0f} ms = {m['cpu_ratio']:.2f}x"


def rss_row(name: str, m: dict, target_mb: float | None) -> tuple[str, str, str, str, bool]:
    mb = m["rss_kib"] / 1024
    if target_mb is None:
        return name, f"{mb:.1f} MB", "info", "", True
    return name, f"{mb:.1f} MB", f"<= {target_mb:g} MB", f"{mb / target_mb:.2f}", mb <= target_mb


def serve_forever(text_chunks: int) -> None:
    """Child mode: a fake OpenAI-wire server whose every reply is ``text_chunks`` chunks of 4 characters."""
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from fake_llm import FakeLLMServer, Reply

    reply = Reply(text="abcd" * text_chunks, chunk_size=4, usage=(10, text_chunks))

    class Always(FakeLLMServer):
        def next_item(self, body: object) -> Reply:
            return reply

    with Always("openai") as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


def start_server(chunks: int) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen(
        [sys.executable, __file__, "--serve", str(chunks)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    return child, child.stdout.readline().strip()


def write_config(home: Path, base_url: str, extra: str = "") -> None:
    (home / "config.toml").write_text(
        f'default_provider = "fake"\n[providers.fake]\nkind = "openai_compatible"\napi_base = "{base_url}"\n'
        'default_model = "m"\nmodels = ["m"]\napi_key = "sk-bench"\n' + extra
    )


class Bench:
    """Each row: the baseline, then this checkout's install (and, with --before, an older revision's)."""

    def __init__(self, after: Path, before: Path | None) -> None:
        self.installs = [after] + ([before] if before else [])
        self.rows: list[tuple[str, str, str, str, bool]] = []
        self.versus: list[tuple[str, str, str, str]] = []

    def row(
        self,
        name: str,
        baseline: list[str],
        args: list[str],
        env: dict,
        target: float,
        cwd: Path | None = None,
        runs: int = RUNS,
    ) -> tuple[dict, dict]:
        """The baseline's figures and this checkout's."""
        argvs = [baseline] + [[str(v / "bin" / "openheim"), *args] for v in self.installs]
        base, after, *before = paired(argvs, env, cwd, runs)
        self.rows.append(ratio_row(name, base, after, target))
        if before:
            self.versus.append((name, ratio(before[0]), ratio(after), f"<= {target}x"))
        return base, after


def import_profile(venv: Path, env: dict, cwd: Path) -> list[str]:
    """`python -X importtime` of `openheim run hi`: module counts and the slowest imports, as lines to print."""
    argv = [str(venv / "bin" / "python"), "-X", "importtime", str(venv / "bin" / "openheim"), "run", "hi"]
    err = subprocess.run(
        argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, capture_output=True, text=True, check=True
    ).stderr
    rows = []
    for line in err.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            own, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
            rows.append((int(own), int(cumulative), name))
    ours = [r for r in rows if r[2].lstrip().split(".")[0] == "openheim"]
    top = sorted(rows, key=lambda r: -r[0])[:12]
    lines = [
        f"python -X importtime: `run hi` imports {len(rows)} modules ({len(ours)} of openheim), "
        f"{sum(r[0] for r in rows) / 1000:.0f} ms of import in all ({sum(r[0] for r in ours) / 1000:.0f} ms "
        "in openheim's own modules); the slowest by self time:"
    ]
    lines += [f"  {own / 1000:7.1f} ms  {name.strip()}" for own, _, name in top]
    return lines


def mcp_time_server() -> str | None:
    """mcp-server-time's console script, when installed next to this interpreter or on PATH."""
    local = Path(sys.executable).with_name("mcp-server-time")
    return str(local) if local.exists() else shutil.which("mcp-server-time")


def main(argv: list[str]) -> int:
    before_ref = argv[argv.index("--before") + 1] if "--before" in argv else None
    venv = user_venv(name=argv[argv.index("--venv-name") + 1]) if "--venv-name" in argv else user_venv()
    bench = Bench(venv, revision_venv(before_ref) if before_ref else None)
    py = str(venv / "bin" / "python")
    floor = [py, str(Path(__file__).with_name("floor.py"))]
    notes: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        env.update(OPENHEIM_HOME=str(home), HOME=str(home), NO_PROXY="127.0.0.1")

        _, version = bench.row("openheim --version / python -c pass", [py, "-c", "pass"], ["--version"], env, 2.0)
        bench.rows.append(rss_row("  --version peak RSS", version, None))

        short, short_url = start_server(5)
        long, long_url = start_server(CHUNKS)
        try:
            write_config(home, short_url)
            base, hi = bench.row(
                "run hi / floor.py (cpu, paired)",
                floor + ["--url", short_url, "hi"],
                ["run", "hi"],
                env,
                1.15,
                cwd=home,
            )
            bench.rows.append(rss_row("  run hi peak RSS", hi, 35))
            bench.rows.append(rss_row("  floor.py peak RSS", base, None))
            notes += import_profile(venv, env, home)

            server = mcp_time_server()
            if server:
                plain = [str(venv / "bin" / "openheim"), "run", "hi"]
                mcp_home = home / "mcp"
                mcp_home.mkdir()
                write_config(mcp_home, short_url, f'\n[mcp_servers.time]\ncommand = "{server}"\n')
                # the same install, two homes: the one configuring the MCP server is given by env(1)
                with_mcp = ["env", f"OPENHEIM_HOME={mcp_home}", f"HOME={mcp_home}"] + plain
                no_mcp, one = paired([plain, with_mcp], env, home, runs=5)
                bench.rows.append(
                    (
                        "run hi with 1 MCP server (time) / without",
                        f"{one['wall'] * 1000:.0f}/{no_mcp['wall'] * 1000:.0f} ms wall",
                        "info",
                        f"{one['wall_ratio']:.2f}x",
                        True,
                    )
                )
                bench.rows.append(rss_row("  run hi with 1 MCP server peak RSS", one, None))
            else:
                bench.rows.append(("run hi with 1 MCP server", "mcp-server-time missing", "info", "-", True))

            write_config(home, long_url)
            bench.row(
                f"{CHUNKS} chunks: run x | pipe / floor.py (cpu, paired)",
                floor + ["--url", long_url, "x"],
                ["run", "x"],
                env,
                1.05,
                cwd=home,
                runs=7,
            )
        finally:
            for child in (short, long):
                child.stdin.close()
                child.wait(timeout=10)
    table(bench.rows)
    print("measured: the installed console script of a regular `pip install .` in", venv)
    print("\n".join(notes))
    if bench.versus:
        print(f"\nbefore ({before_ref}) and after (this checkout), measured in the same run against the same baseline:")
        print(f"{'benchmark':<64} {'before':>18} {'after':>18} {'target':>8}")
        for name, was, now, target in bench.versus:
            print(f"{name:<64} {was:>18} {now:>18} {target:>8}")
    return 0 if all(r[4] for r in bench.rows) else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        serve_forever(int(sys.argv[2]))
    else:
        sys.exit(main(sys.argv[1:]))
