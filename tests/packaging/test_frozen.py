"""The PyInstaller binary end to end: run whenever PyInstaller is installed (a test dependency); see docs/packaging.md.

The binary comes from the ``frozen_bin`` fixture (tests/support/frozen_build.py): build/dist/openheim, built
with build/build.sh unless it is newer than every source it is made from, or $OPENHEIM_FROZEN_BIN as given.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from importlib.util import find_spec
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, Reply, ToolCall
from frozen_build import BUILD_LOG
from memory_fakes import EmbeddingsServer

import openheim

# a built binary names the commit it was built from (build/openheim.spec writes it)
BUILT_VERSION = re.compile(rf"openheim, version {re.escape(openheim.__version__)} \(commit [0-9a-f]{{12}}(-dirty)?\)\n")

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(600),  # the first test may wait for a build
    pytest.mark.skipif(
        os.environ.get("OPENHEIM_TEST_FROZEN") == "0"
        or (os.environ.get("OPENHEIM_TEST_FROZEN") != "1" and find_spec("PyInstaller") is None),
        reason="PyInstaller is not installed (or OPENHEIM_TEST_FROZEN=0)",
    ),
]


def run_bin(
    binary: Path, *args: str, cwd: Path, env: dict | None = None, inherit: bool = True, input: str | None = None
) -> subprocess.CompletedProcess:
    """Run the frozen binary outside the checkout, with no PYTHONPATH to fall back on."""
    full_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")} if inherit else {}
    full_env.update(env or {})
    full_env = {k: v for k, v in full_env.items() if v is not None}
    return subprocess.run(
        [str(binary), *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=full_env,
        timeout=60,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
    )


def bundled(path: str) -> bool:
    """Inside the binary's unpacked files (PyInstaller's _MEI folder, or the packed folder's _internal)."""
    return "/_MEI" in path or "/_internal/" in path


def write_config(home: Path, text: str) -> None:
    (home / "config.toml").write_text(text)


def provider(name: str, base_url: str, kind: str = "openai_compatible") -> str:
    return (
        f'[providers.{name}]\nkind = "{kind}"\napi_base = "{base_url}"\n'
        f'default_model = "fake-model"\napi_key = "sk-test-SECRET-123"\ntimeout_secs = 5\n'
    )


def test_version(frozen_bin, tmp_path):
    r = run_bin(frozen_bin, "--version", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert BUILT_VERSION.fullmatch(r.stdout)


def test_the_build_prints_only_what_a_builder_must_act_on(frozen_bin):
    if not BUILD_LOG.is_file() or BUILD_LOG.stat().st_mtime < frozen_bin.stat().st_mtime:
        pytest.skip("the binary was not built by this test suite's build/build.sh run")
    warnings = [line for line in BUILD_LOG.read_text().splitlines() if "WARNING" in line or "ERROR" in line]
    assert warnings == []


def test_help_lists_every_command_with_its_help_text(frozen_bin, tmp_path):
    """Lazily named subcommands are inside the binary, and optimize=1 kept click's docstrings."""
    r = run_bin(frozen_bin, "--help", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    commands = r.stdout.split("Commands:")[1]
    for name in ("acp", "doctor", "init", "mcp", "memory", "run", "serve", "sessions", "stdio"):
        assert f"\n  {name} " in commands, r.stdout
    assert "Check this installation" in commands and "Exit codes:" in r.stdout
    sub = run_bin(frozen_bin, "doctor", "--help", cwd=tmp_path)
    assert sub.returncode == 0 and "--json" in sub.stdout and "a check failed" in sub.stdout


WIRES = {"openai": "openai", "openai_compatible": "openai", "anthropic": "anthropic", "gemini": "gemini"}


def test_broken_pipe_is_quiet_and_documented(frozen_bin, isolated_home, tmp_path):
    """`| head` on the binary: no message, no traceback, no 'Exception ignored', exit 141 (as the package)."""
    import shlex

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, f'default_provider = "fake"\n{provider("fake", srv.base_url)}')
        srv.enqueue(Reply(text="".join(f"line {n}\n" for n in range(400)), chunk_size=7, delay=0.005))
        for command, reader in (
            (f"{shlex.quote(str(frozen_bin))} run count", "head -2"),
            (f"(sleep 0.5; {shlex.quote(str(frozen_bin))} doctor)", "true"),
        ):
            script = f'{command} 2>err.txt </dev/null | {reader}; echo "status=${{PIPESTATUS[0]}}"'
            r = subprocess.run(
                ["bash", "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60
            )
            assert r.stdout.endswith("status=141\n"), (command, r.stdout)
            assert (tmp_path / "err.txt").read_text() == "", command


@pytest.mark.parametrize("kind", sorted(WIRES))
def test_run_prints_the_reply(frozen_bin, isolated_home, tmp_path, kind):
    with FakeLLMServer(wire=WIRES[kind]) as srv:
        write_config(isolated_home, f'default_provider = "fake"\n{provider("fake", srv.base_url, kind)}')
        r = run_bin(frozen_bin, "run", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "echo: hi\n"
    assert len(srv.requests) == 1 and "sk-test-SECRET-123" in " ".join(srv.requests[0].headers.values())


def test_init_writes_a_config_and_doctor_judges_it(frozen_bin, isolated_home, tmp_path):
    """`init` from nothing; `doctor` fails until the default provider's key is set, and reports the
    bundled CA file, sqlite-vec and a UTF-8 locale even in an empty environment."""
    (isolated_home / "config.toml").unlink(missing_ok=True)
    env = {"PATH": "/usr/bin:/bin", "HOME": str(isolated_home.parent), "OPENHEIM_HOME": str(isolated_home)}
    init = run_bin(frozen_bin, "init", cwd=tmp_path, env=env, inherit=False)
    assert init.returncode == 0, init.stderr
    assert (isolated_home / "config.toml").is_file() and (isolated_home / "system.md").is_file()
    before = run_bin(frozen_bin, "doctor", "--offline", cwd=tmp_path, env=env, inherit=False)
    assert before.returncode == 1, before.stdout
    assert before.stdout.splitlines()[-1].startswith("not ready: provider openai (default) failed")
    r = run_bin(
        frozen_bin,
        "doctor",
        "--json",
        "--offline",
        cwd=tmp_path,
        env={**env, "OPENAI_API_KEY": "sk-SECRET-9"},
        inherit=False,
    )
    assert r.returncode == 0, r.stdout
    facts = json.loads(r.stdout)
    assert "sk-SECRET-9" not in r.stdout
    assert facts["version"]["frozen"] is True and facts["version"]["openheim"] == openheim.__version__
    openai = next(p for p in facts["providers"] if p["name"] == "openai")
    assert openai["key_from"] == "env:OPENAI_API_KEY" and openai["status"] == "ok"
    ca = facts["ca_bundle"]
    inside = bundled(ca["path"])  # the binary's own copy, not the build venv's
    assert ca["from"] == "certifi" and inside and ca["path"].endswith("certifi/cacert.pem")
    assert ca["loadable"] is True and ca["certificates"] > 100, ca
    assert facts["vectors"]["available"] is True and bundled(facts["vectors"]["library"]), facts["vectors"]
    assert facts["locale"] == {**facts["locale"], "utf8": True, "utf8_mode": True, "lang": None, "lc_all": None}
    c_locale = run_bin(
        frozen_bin,
        "doctor",
        "--json",
        "--offline",
        cwd=tmp_path,
        env={**env, "LC_ALL": "C", "LANG": "C"},
        inherit=False,
    )
    assert json.loads(c_locale.stdout)["locale"]["utf8"] is True, c_locale.stdout


def test_acp_round_trip_with_the_acp_client_library(frozen_bin, isolated_home, tmp_path):
    """`acp` is a lazily named subcommand: a real ACP client initializes, opens a session and prompts."""
    import asyncio

    acp = pytest.importorskip("acp")
    from acp.schema import ClientCapabilities, Implementation

    class Editor:
        def __init__(self) -> None:
            self.chunks: list[str] = []

        def on_connect(self, conn) -> None:
            pass

        async def session_update(self, session_id, update, **kw) -> None:
            if update.session_update == "agent_message_chunk":
                self.chunks.append(update.content.text)

    editor = Editor()

    async def main() -> tuple:
        env = {
            "PATH": os.environ["PATH"],
            "HOME": os.environ["HOME"],
            "OPENHEIM_HOME": str(isolated_home),
            "NO_PROXY": "127.0.0.1,localhost",
        }
        async with acp.spawn_agent_process(editor, str(frozen_bin), "acp", env=env, cwd=str(tmp_path)) as (conn, _):
            init = await conn.initialize(
                protocol_version=acp.PROTOCOL_VERSION,
                client_capabilities=ClientCapabilities(),
                client_info=Implementation(name="pytest", version="1"),
            )
            session = await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
            result = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi there")])
            return init, result

    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, f'default_provider = "fake"\n{provider("fake", srv.base_url)}')
        init, result = asyncio.run(asyncio.wait_for(main(), 30))
    assert init.protocol_version == 1 and init.agent_info.name == "openheim"
    assert result.stop_reason == "end_turn"
    assert "".join(editor.chunks) == "echo: hi there"


def test_serve_answers_http_and_websocket(frozen_bin, isolated_home, tmp_path):
    """`serve` (lazily named, websockets inside the binary): the page, the REST API and ACP over /acp."""
    import signal
    import urllib.request
    from urllib.parse import parse_qs, urlsplit

    from websockets.sync.client import connect

    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, f'default_provider = "fake"\n{provider("fake", srv.base_url)}')
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
        proc = subprocess.Popen(
            [str(frozen_bin), "serve", "--port", "0"],
            cwd=tmp_path,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            line = proc.stderr.readline()
            assert "listening on http://127.0.0.1:" in line, line + proc.stderr.read()
            url = urlsplit(line.split("listening on ", 1)[1].split()[0])  # with the token serve made up
            base, token = f"{url.scheme}://{url.netloc}", parse_qs(url.query)["token"][0]
            auth = {"Authorization": f"Bearer {token}"}
            with urllib.request.urlopen(f"{base}/?token={token}", timeout=10) as page:
                assert page.status == 200 and b"<html" in page.read().lower()
            models_request = urllib.request.Request(base + "/api/models", headers=auth)
            with urllib.request.urlopen(models_request, timeout=10) as models:
                assert json.loads(models.read()) == {
                    "default_provider": "fake",
                    "providers": {"fake": {"default_model": "fake-model", "models": []}},
                }
            with connect(base.replace("http", "ws", 1) + "/acp", open_timeout=10, additional_headers=auth) as ws:
                frames = _acp_over_ws(ws, tmp_path)
        finally:
            proc.send_signal(signal.SIGTERM)
            _out, err = proc.communicate(timeout=15)
    assert proc.returncode == 0, err
    assert frames["prompt"]["result"]["stopReason"] == "end_turn"
    assert "".join(frames["chunks"]) == "echo: over a socket"


def _acp_over_ws(ws, cwd: Path) -> dict:
    """initialize, session/new and session/prompt as bare JSON-RPC; the prompt's reply and text chunks."""

    def call(id_: int, method: str, params: dict) -> dict:
        ws.send(json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params}))
        while True:
            frame = json.loads(ws.recv(timeout=20))
            if frame.get("id") == id_ and "method" not in frame:
                return frame
            update = frame.get("params", {}).get("update", {})
            if update.get("sessionUpdate") == "agent_message_chunk":
                chunks.append(update["content"]["text"])

    chunks: list[str] = []
    call(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    session = call(2, "session/new", {"cwd": str(cwd), "mcpServers": []})["result"]["sessionId"]
    prompt = call(3, "session/prompt", {"sessionId": session, "prompt": [{"type": "text", "text": "over a socket"}]})
    return {"prompt": prompt, "chunks": chunks}


def test_memory_uses_sqlite_vec_inside_the_binary(frozen_bin, isolated_home, tmp_path):
    with EmbeddingsServer() as emb:
        write_config(
            isolated_home,
            'default_provider = "emb"\n'
            '[memory]\nembedding_provider = "emb"\nembedding_model = "embed-a"\n' + provider("emb", emb.url + "/v1"),
        )
        for note in ("my automobile is red", "the kitchen tap drips"):
            added = run_bin(frozen_bin, "memory", "add", note, "--json", cwd=tmp_path)
            assert added.returncode == 0, added.stderr
        stats = json.loads(run_bin(frozen_bin, "memory", "stats", "--json", cwd=tmp_path).stdout)
        found = run_bin(frozen_bin, "memory", "search", "vehicle", "--json", cwd=tmp_path)
    assert stats["vectors_available"] is True, stats["vectors_reason"]
    assert stats["embedded"] == 2 and stats["memories"] == 2
    assert found.returncode == 0, found.stderr
    result = json.loads(found.stdout)
    assert result["mode"] == "semantic", result["reason"]  # "vehicle" shares no word with the note
    assert result["results"][0]["content"] == "my automobile is red"


def test_empty_environment_still_loads_vectors(frozen_bin, isolated_home, tmp_path):
    """Like cron or `env -i`: no locale, no LD_LIBRARY_PATH, a bare PATH (B.1.6 #4)."""
    write_config(isolated_home, 'default_provider = "p"\n' + provider("p", "http://127.0.0.1:9/v1"))
    env = {"PATH": "/usr/bin:/bin", "HOME": os.environ["HOME"], "OPENHEIM_HOME": str(isolated_home)}
    added = run_bin(frozen_bin, "memory", "add", "Grüße aus dem Speicher", cwd=tmp_path, env=env, inherit=False)
    assert added.returncode == 0, added.stderr
    listed = run_bin(frozen_bin, "memory", "list", "--json", cwd=tmp_path, env=env, inherit=False)
    stats = run_bin(frozen_bin, "memory", "stats", "--json", cwd=tmp_path, env=env, inherit=False)
    assert json.loads(listed.stdout)[0]["content"] == "Grüße aus dem Speicher"
    assert json.loads(stats.stdout)["vectors_available"] is True, stats.stdout


SHELL_PROBE = "env; echo =====; tr '\\0' '\\n' < /proc/$PPID/environ"  # the shell's env, then openheim's own


def shell_probe(binary: Path, home: Path, cwd: Path, env: dict) -> tuple[list[str], list[str]]:
    """Environment lines of a shell run by execute_command, and of the frozen process that ran it."""
    with FakeLLMServer(wire="openai") as srv:
        write_config(home, f'default_provider = "fake"\nallow_shell = true\n{provider("fake", srv.base_url)}')
        srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": SHELL_PROBE})]), Reply(text="done"))
        r = run_bin(binary, "run", "show env", cwd=cwd, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    child, _, own = srv.requests[1].body["messages"][-1]["content"].partition("=====\n")
    assert "OPENHEIM_HOME=" in child and "OPENHEIM_HOME=" in own  # the tool really ran
    return child.splitlines(), own.splitlines()


def _onefile(binary: Path) -> bool:
    """PyInstaller's own onefile mode (not build.sh's packed folder, which starts no bootloader parent)."""
    return not (binary.parent / "_internal").is_dir() and binary.read_bytes()[:2] != b"#!"


@pytest.mark.parametrize("outer", ["/opt/user-libs", None])
def test_shell_child_sees_the_users_library_path(frozen_bin, isolated_home, tmp_path, outer):
    child, own = shell_probe(frozen_bin, isolated_home, tmp_path, {"LD_LIBRARY_PATH": outer})
    if _onefile(frozen_bin):  # control: the bootloader did put its _MEI folder first in openheim's own env
        assert any(x.startswith("LD_LIBRARY_PATH=") and "/_MEI" in x for x in own), own
    assert [x for x in child if x.startswith("LD_LIBRARY_PATH")] == ([f"LD_LIBRARY_PATH={outer}"] if outer else [])


def children_env(command: list[str], home: Path, cwd: Path, env: dict) -> tuple[dict, dict]:
    """The environment of a shell run by execute_command and of a stdio MCP server, both started by ``command``
    (``openheim`` frozen or from source) under ``env``."""
    from mcp_helpers import PYTHON, SERVER, wait_until

    dump = cwd / f"mcp-env-{len(list(cwd.glob('mcp-env-*')))}"
    wrapper = f"env > {dump}; exec {PYTHON} {SERVER}"
    with FakeLLMServer(wire="openai") as srv:
        write_config(
            home,
            f'default_provider = "fake"\nallow_shell = true\n{provider("fake", srv.base_url)}\n'
            f'[mcp_servers.probe]\ncommand = "/bin/sh"\nargs = ["-c", "{wrapper}"]\n',
        )
        srv.enqueue(
            Reply(
                tool_calls=[ToolCall("execute_command", {"command": "env"}), ToolCall("probe__echo", {"text": "up"})]
            ),
            Reply(text="done"),
        )
        r = subprocess.run(
            [*command, "run", "show env"],
            check=False,
            capture_output=True,
            text=True,
            cwd=cwd,
            env=env,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    shell_out, mcp_out = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert mcp_out == "echo: up" and wait_until(dump.exists, timeout=5)
    return _env_lines(shell_out), _env_lines(dump.read_text())


def _env_lines(text: str) -> dict:
    pairs = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
    pairs.pop("PYTHONPATH", None)  # only the source run needs it, to find this checkout
    if "/openheim-cmd-" in pairs.get("TMPDIR", ""):
        pairs["TMPDIR"] = "<the command's own temp dir>"  # the sandbox makes a fresh one per command
    return pairs


def test_children_get_the_environment_the_installed_package_gives_them(frozen_bin, isolated_home, tmp_path):
    """A shell command and an MCP server started by the binary see exactly what they see when the same
    config runs from source: no bootloader LD_LIBRARY_PATH, _PYI_* or _MEIPASS*, the user's own path kept."""
    import sys

    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    base["LD_LIBRARY_PATH"] = "/opt/user-libs"
    frozen_shell, frozen_mcp = children_env([str(frozen_bin)], isolated_home, tmp_path, base)
    source_shell, source_mcp = children_env(
        [sys.executable, "-m", "openheim"], isolated_home, tmp_path, {**base, "PYTHONPATH": str(ROOT)}
    )
    assert frozen_shell == source_shell
    assert frozen_mcp == source_mcp
    parent = {k: v for k, v in base.items() if k not in ("PWD", "TMPDIR")}
    # the shell sets PWD itself; the sandbox gives each command a TMPDIR of its own
    assert {k: v for k, v in frozen_shell.items() if k not in ("PWD", "TMPDIR")} == parent
    assert {k: v for k, v in frozen_mcp.items() if k != "PWD"} == {k: parent[k] for k in frozen_mcp if k != "PWD"}
    assert frozen_shell["LD_LIBRARY_PATH"] == "/opt/user-libs" and "OPENHEIM_HOME" in frozen_shell
    leaked = [k for k in {**frozen_shell, **frozen_mcp} if k.startswith(("_PYI_", "_MEIPASS"))]
    assert leaked == [] and not any("/_MEI" in v for v in {**frozen_shell, **frozen_mcp}.values())


def test_mcp_servers_over_stdio_and_http_inside_the_binary(frozen_bin, isolated_home, tmp_path):
    """MCP is in the default binary: a stdio and an HTTP server's tools are called; both end with openheim."""
    from mcp_helpers import PYTHON, SERVER, HttpServer, new_tag, pids_with, wait_until

    tag = new_tag()
    with FakeLLMServer(wire="openai") as srv, HttpServer() as http:
        write_config(
            isolated_home,
            f'default_provider = "fake"\n{provider("fake", srv.base_url)}\n'
            f'[mcp_servers.local]\ncommand = "{PYTHON}"\nargs = ["{SERVER}", "--tag", "{tag}"]\n'
            f'[mcp_servers.web]\nurl = "{http.url}"\nheaders = {{ X-Team = "blue" }}\n',
        )
        srv.enqueue(
            Reply(
                tool_calls=[
                    ToolCall("local__echo", {"text": "via stdio"}),
                    ToolCall("web__header", {"name": "x-team"}),
                    ToolCall("local__env", {"name": "LD_LIBRARY_PATH"}),
                ]
            ),
            Reply(text="done"),
        )
        r = run_bin(frozen_bin, "run", "go", cwd=tmp_path)
        status = run_bin(frozen_bin, "mcp", "--json", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "done\n"
    results = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert results == ["echo: via stdio", "blue", "<unset>"]  # the server never sees the bundle's library path
    assert wait_until(lambda: not pids_with(tag), timeout=5)
    servers = {s["name"]: s for s in json.loads(status.stdout)["servers"]}
    assert servers["local"]["connected"] and servers["web"]["connected"], status.stdout


# --- the packed single file: unpacked once per user, then started directly ----------------------------------


def packed(binary: Path) -> bool:
    return binary.read_bytes()[:2] == b"#!"


def fresh_env(home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENHEIM_CACHE_DIR", "XDG_CACHE_HOME", "TMPDIR")}
    return {**env, "HOME": str(home), **extra}


def entries(cache: Path) -> list[Path]:
    return sorted(cache.iterdir()) if cache.is_dir() else []


def test_the_first_start_unpacks_into_a_private_cache_and_later_starts_reuse_it(frozen_bin, isolated_home, tmp_path):
    if not packed(frozen_bin):
        pytest.skip("not build.sh's packed single file")
    home = tmp_path / "home"
    home.mkdir()
    os.umask(old := os.umask(0o022))
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, f'default_provider = "fake"\nallow_shell = true\n{provider("fake", srv.base_url)}')
        srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "umask"})]), Reply(text="done"))
        r = subprocess.run(
            [str(frozen_bin), "run", "umask?"],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            env=fresh_env(home, OPENHEIM_HOME=str(isolated_home)),
            timeout=120,
            check=False,
            stdin=subprocess.DEVNULL,
        )
    assert r.returncode == 0, r.stderr
    assert f"{old:04o}" in srv.requests[1].body["messages"][-1]["content"]  # the unpacking umask did not leak
    cache = home / ".cache" / "openheim"
    assert (cache.stat().st_mode & 0o777) == 0o700
    [unpacked] = entries(cache)
    assert unpacked.name.startswith(f"{openheim.__version__}-") and (unpacked / "openheim").is_file()
    stamp = unpacked.stat().st_ino, unpacked.stat().st_mtime_ns
    again = subprocess.run(
        [str(frozen_bin), "--version"], capture_output=True, text=True, env=fresh_env(home), timeout=60, check=False
    )
    assert again.returncode == 0 and BUILT_VERSION.fullmatch(again.stdout)
    assert entries(cache) == [unpacked] and (unpacked.stat().st_ino, unpacked.stat().st_mtime_ns) == stamp


def test_simultaneous_first_starts_all_work_and_leave_one_copy(frozen_bin, tmp_path):
    if not packed(frozen_bin):
        pytest.skip("not build.sh's packed single file")
    cache = tmp_path / "cache"
    env = fresh_env(tmp_path, OPENHEIM_CACHE_DIR=str(cache))
    procs = [
        subprocess.Popen(
            [str(frozen_bin), "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), results
    assert all(BUILT_VERSION.fullmatch(out) for out, _ in results)
    assert [e.name for e in entries(cache) if not e.name.startswith(".unpack.")] and len(entries(cache)) == 1


def test_without_a_usable_home_it_unpacks_into_a_private_temp_dir(frozen_bin, tmp_path):
    if not packed(frozen_bin):
        pytest.skip("not build.sh's packed single file")
    env = {"PATH": os.environ["PATH"], "TMPDIR": str(tmp_path)}  # no HOME at all, as under some services
    r = subprocess.run(
        [str(frozen_bin), "--version"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    private = tmp_path / f"openheim-{os.getuid()}"
    assert (private.stat().st_mode & 0o777) == 0o700 and len(entries(private)) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to make a directory owned by someone else")
def test_a_cache_dir_owned_by_someone_else_is_never_used(frozen_bin, tmp_path):
    if not packed(frozen_bin):
        pytest.skip("not build.sh's packed single file")
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o777)
    os.chown(theirs, 65534, 65534)
    env = fresh_env(tmp_path, OPENHEIM_CACHE_DIR=str(theirs), TMPDIR=str(tmp_path))
    r = subprocess.run(
        [str(frozen_bin), "--version"], capture_output=True, text=True, env=env, timeout=120, check=False
    )
    assert r.returncode == 0, r.stderr
    assert entries(theirs) == [] and len(entries(tmp_path / f"openheim-{os.getuid()}")) == 1
