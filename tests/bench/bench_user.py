"""What a user pays: a regular (non-editable) install in its own venv, whole processes from exec to exit,
output to a pipe, with PYTHONUNBUFFERED unset and set; baselines from that same venv and curl -N on the
same fake-server stream; the two commands of each row run in turn and medians are compared.

Run: .venv/bin/python tests/bench/bench_user.py [--before REF]   (the first run builds the venv: about a minute;\n--before REF adds the same rows for a regular install of git revision REF, measured in the same run)
"""
from __future__ import annotations

import json
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
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
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


def interleaved(argvs: list[list[str]], env: dict, cwd: Path | None = None, runs: int = RUNS) -> list[dict]:
    """Median wall and cpu of each command, run in turn (so machine load hits all alike), and peak RSS."""
    walls, cpus, rss = [[] for _ in argvs], [[] for _ in argvs], [0] * len(argvs)
    for _ in range(runs):
        for i, argv in enumerate(argvs):
            w, c, r = run_piped(argv, env, cwd)
            walls[i].append(w)
            cpus[i].append(c)
            rss[i] = max(rss[i], r)
    med = statistics.median
    return [{"wall": med(w), "cpu": med(c), "rss_kib": r} for w, c, r in zip(walls, cpus, rss)]


def ratio_row(name: str, base: dict, m: dict, target: float) -> tuple[str, str, str, str, bool]:
    ratio = m["wall"] / base["wall"]
    measured = f"{m['wall'] * 1000:.0f}/{base['wall'] * 1000:.0f} ms"
    return name, measured, f"<= {target}x", f"{ratio:.2f}x (cpu {m['cpu'] / base['cpu']:.2f}x)", ratio <= target


def ratio(m: dict, base: dict) -> str:
    return f"{m['wall'] * 1000:.0f} ms = {m['wall'] / base['wall']:.2f}x"


def serve_forever(text_chunks: int) -> None:
    """Child mode: a fake OpenAI-wire server whose every reply is ``text_chunks`` chunks of 4 characters."""
    sys.path.insert(0, str(ROOT / "tests"))
    from fake_llm import FakeLLMServer, Reply

    reply = Reply(text="abcd" * text_chunks, chunk_size=4, usage=(10, text_chunks))

    class Always(FakeLLMServer):
        def next_item(self, body: object) -> Reply:
            return reply

    with Always("openai") as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()


def start_server(chunks: int) -> tuple[subprocess.Popen, str]:
    child = subprocess.Popen([sys.executable, __file__, "--serve", str(chunks)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    return child, child.stdout.readline().strip()


def write_config(home: Path, base_url: str) -> None:
    (home / "config.toml").write_text(
        f'default_provider = "fake"\n[providers.fake]\nkind = "openai_compatible"\napi_base = "{base_url}"\n'
        'default_model = "m"\nmodels = ["m"]\napi_key = "sk-bench"\n')


class Bench:
    """Each row: the baseline, then this checkout's install (and, with --before, an older revision's)."""

    def __init__(self, after: Path, before: Path | None) -> None:
        self.installs = [after] + ([before] if before else [])
        self.rows: list[tuple[str, str, str, str, bool]] = []
        self.versus: list[tuple[str, str, str, str]] = []

    def row(self, name: str, baseline: list[str], args: list[str], env: dict, target: float,
            cwd: Path | None = None, runs: int = RUNS) -> dict:
        argvs = [baseline] + [[str(v / "bin" / "openheim"), *args] for v in self.installs]
        base, after, *before = interleaved(argvs, env, cwd, runs)
        self.rows.append(ratio_row(name, base, after, target))
        if before:
            self.versus.append((name, ratio(before[0], base), ratio(after, base), f"<= {target}x"))
        return after


def main(argv: list[str]) -> int:
    before_ref = argv[argv.index("--before") + 1] if "--before" in argv else None
    venv = user_venv()
    bench = Bench(venv, revision_venv(before_ref) if before_ref else None)
    py = str(venv / "bin" / "python")
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        base_env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
        base_env.update(OPENHEIM_HOME=str(home), HOME=str(home), NO_PROXY="127.0.0.1")
        envs = {"unset": base_env, "set": {**base_env, "PYTHONUNBUFFERED": "1"}}

        bench.row("openheim --version vs python -c pass", [py, "-c", "pass"], ["--version"], base_env, 2.0)

        short, short_url = start_server(5)
        long, long_url = start_server(CHUNKS)
        try:
            write_config(home, short_url)
            floor = [py, "-c", "import click, requests, sseclient"]
            for mode, env in envs.items():
                m = bench.row(f"run 'hi' vs import click+requests+sseclient (UNBUFFERED {mode})", floor,
                              ["run", "hi"], env, 1.3, cwd=home)
            bench.rows.append(("run 'hi' peak RSS", f"{m['rss_kib'] / 1024:.1f} MB", "<= 35 MB", "",
                               m["rss_kib"] / 1024 <= 35))

            write_config(home, long_url)
            curl = shutil.which("curl")
            if curl:
                body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": "x"}]})
                curl_argv = [curl, "-sN", "-X", "POST", f"{long_url}/chat/completions", "-H",
                             "Content-Type: application/json", "-d", body]
                for mode, env in envs.items():
                    bench.row(f"{CHUNKS} chunks: run x | pipe vs curl -N (UNBUFFERED {mode})", curl_argv,
                              ["run", "x"], env, 1.5, cwd=home, runs=5)
            else:
                bench.rows.append((f"{CHUNKS} chunks vs curl -N", "curl missing", "<= 1.5x", "-", False))
        finally:
            for child in (short, long):
                child.stdin.close()
                child.wait(timeout=10)

        binary = ROOT / "build" / "dist" / "openheim"
        if binary.exists():
            times = [run_piped([str(binary), "--version"], base_env)[0] for _ in range(RUNS)]
            cold = statistics.median(times)
            bench.rows.append(("frozen binary --version", f"{cold * 1000:.0f} ms", "<= 250 ms", "", cold <= 0.25))
        else:
            bench.rows.append(("frozen binary --version", "not built", "<= 250 ms", "build/build.sh", True))
    table(bench.rows)
    print("measured: the installed console script of a regular `pip install .` in", venv)
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
