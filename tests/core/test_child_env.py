"""Every child process's environment comes from openheim.core.child_env.child_environ.

The scan finds every process spawn in the package (subprocess, os.exec*/posix_spawn/fork, pty, asyncio/anyio
process spawns) and checks that its environment is built there; the few spawns that pass no environment of the
user's are listed with the reason. The behaviour tests drive `openheim run` with secrets and channel variables
in its environment and read what the model's command and a hook see.
"""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from source_ast import parse

from openheim.core.child_env import CHANNELS, child_environ

PACKAGE = Path(__file__).resolve().parents[2] / "openheim"
SPAWNS = {
    ("subprocess", "Popen"),
    ("subprocess", "run"),
    ("subprocess", "call"),
    ("subprocess", "check_call"),
    ("subprocess", "check_output"),
    ("os", "posix_spawn"),
    ("os", "posix_spawnp"),
    ("os", "fork"),
    ("os", "forkpty"),
    ("pty", "fork"),
    ("pty", "spawn"),
    ("asyncio", "create_subprocess_exec"),
    ("asyncio", "create_subprocess_shell"),
    ("anyio", "open_process"),
    ("anyio", "run_process"),
    ("mcp", "StdioServerParameters"),
    ("mcp", "stdio_client"),
}
SPAWN_PREFIXES = {("os", "exec"), ("os", "spawn")}
# (module, function): why the spawn gets no environment of the user's to clean
ALLOWED = {
    ("openheim/tools/forked.py", "run_forked"): "fork without exec: runs openheim's own Python function",
    ("openheim/sandbox/forkserver.py", "serve"): "fork without exec: the request child sets the env it was sent, "
    "and the helper builds the command's with child_environ",
}


def _name(func: ast.expr) -> tuple[str, str] | None:
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        return func.value.id, func.attr
    return None


def _is_spawn(call: ast.Call) -> bool:
    name = _name(call.func)
    if name is None:
        return False
    return name in SPAWNS or any(name[0] == m and name[1].startswith(p) for m, p in SPAWN_PREFIXES)


def _env_arg(call: ast.Call) -> ast.expr | None:
    for kw in call.keywords:
        if kw.arg == "env":
            return kw.value
    name = _name(call.func)
    if name and name[0] == "os" and (name[1].startswith("posix_spawn") or name[1].endswith("e")) and len(call.args) > 2:
        return call.args[2]
    return None


def _builders(tree: ast.Module) -> set[str]:
    """child_environ, and the module's functions that return what a child_environ(...) call built."""
    found = {"child_environ"}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and (
                    _calls(ret.value, found)
                    or (isinstance(ret.value, ast.Name) and _built_here(node, ret.value.id, found))
                ):
                    found.add(node.name)
    return found


def _passed_in(tree: ast.Module, func: ast.FunctionDef, name: str, builders: set[str]) -> bool:
    """``name`` is a parameter of ``func`` and every call of ``func`` in the module passes a built env there."""
    params = [a.arg for a in func.args.args]
    if name not in params:
        return False
    index = params.index(name)
    calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", None) == func.name]
    args = [
        next((k.value for k in c.keywords if k.arg == name), c.args[index] if len(c.args) > index else None)
        for c in calls
    ]
    return bool(calls) and all(_calls(a, builders) for a in args)


def _calls(expr: ast.expr | None, names: set[str]) -> bool:
    return isinstance(expr, ast.Call) and (
        (isinstance(expr.func, ast.Name) and expr.func.id in names)
        or (isinstance(expr.func, ast.Attribute) and expr.func.attr in names)
    )


def _built_here(func: ast.AST, name: str, builders: set[str]) -> bool:
    return any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        and _calls(node.value, builders)
        for node in ast.walk(func)
    )


def spawns() -> list[tuple[str, str, int, bool]]:
    """(module, enclosing function, line, whether its env goes through child_environ) for every spawn."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE.parent))
        tree = parse(path.read_text(encoding="utf-8"), str(path))
        builders = _builders(tree)
        for func in ast.walk(tree):
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for call in ast.walk(func):
                if isinstance(call, ast.Call) and _is_spawn(call):
                    env = _env_arg(call)
                    ok = _calls(env, builders) or (
                        isinstance(env, ast.Name)
                        and (_built_here(func, env.id, builders) or _passed_in(tree, func, env.id, builders))
                    )
                    found.append((rel, func.name, call.lineno, ok))
    return found


def test_every_spawn_in_the_package_builds_its_environment_through_child_environ():
    found = spawns()
    assert len(found) >= 8, found  # the scan sees the shell, the helper, hooks, MCP, ripgrep, ...
    bad = [f"{m}:{line} in {f}()" for m, f, line, ok in found if not ok and (m, f) not in ALLOWED]
    assert bad == [], "spawns whose env is not built by child_environ (or listed in ALLOWED with a reason)"


def test_the_allow_list_names_only_spawns_that_exist():
    where = {(m, f) for m, f, _line, ok in spawns() if not ok}
    assert set(ALLOWED) <= where


def test_secrets_go_everywhere_but_channels_only_from_sandboxed_commands(monkeypatch):
    monkeypatch.setenv("OPENHEIM_SERVE_TOKEN", "tok-123456")
    monkeypatch.setenv("TMUX", "/tmp/tmux-0/default,1,0")
    monkeypatch.setenv("SSH_AUTH_SOCK", "/tmp/agent")
    plain = child_environ()
    assert "OPENHEIM_SERVE_TOKEN" not in plain and plain["TMUX"]
    boxed = child_environ(sandboxed=True, keep=["SSH_AUTH_SOCK"])
    assert "TMUX" not in boxed and boxed["SSH_AUTH_SOCK"] == "/tmp/agent"
    assert "TMUX" in CHANNELS and "DBUS_SESSION_BUS_ADDRESS" in CHANNELS
    mcp = child_environ({"PATH": "/bin"}, extra={"GITHUB_TOKEN": "named-by-the-entry"})
    assert mcp == {"PATH": "/bin", "GITHUB_TOKEN": "named-by-the-entry"}


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


CHILD_SECRETS = {
    "OPENHEIM_SERVE_TOKEN": "serve-token-VALUE",
    "MY_PROVIDER_KEY": "provider-key-VALUE",
    "MCP_NAMED_KEY": "mcp-key-VALUE",
    "TMUX": "/tmp/tmux-0/default,1,0",
    "DBUS_SESSION_BUS_ADDRESS": "unix:path=/run/user/0/bus",
    "SSH_AUTH_SOCK": "/tmp/ssh-agent.sock",
    "HARMLESS_SETTING": "visible",
}


@pytest.mark.parametrize("mode", ["workspace-write", "off"])
def test_a_command_and_a_hook_see_no_secret_and_a_sandboxed_one_no_channel(srv, isolated_home, tmp_path, mode):
    hook_out = tmp_path / "hook-env"
    write_config(
        isolated_home,
        srv.base_url,
        extra=(
            f'allow_shell = true\n[sandbox]\nmode = "{mode}"\nkeep_env = ["SSH_AUTH_SOCK"]\n'
            f'[[hooks]]\nevent = "pre_tool"\ncommand = "env > {hook_out}"\n'
            '[mcp_servers.unused]\ncommand = "/nonexistent-mcp"\nenv = { MCP_NAMED_KEY = "x" }\n'
        ),
        provider_extra='env_var = "MY_PROVIDER_KEY"',
    )
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "env"}, id="c0")]), Reply(text="done"))
    work = tmp_path / "work"
    work.mkdir()
    done = openheim("run", "go", "--cwd", str(work), cwd=work, env=CHILD_SECRETS)
    assert done.returncode == 0, done.stderr
    seen = next(m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool")
    for name in ("OPENHEIM_SERVE_TOKEN", "MY_PROVIDER_KEY", "MCP_NAMED_KEY"):
        assert CHILD_SECRETS[name] not in seen and CHILD_SECRETS[name] not in hook_out.read_text(), name
    assert "HARMLESS_SETTING=visible" in seen
    assert "SSH_AUTH_SOCK=/tmp/ssh-agent.sock" in seen  # kept by keep_env
    channels_seen = [n for n in ("TMUX", "DBUS_SESSION_BUS_ADDRESS") if f"{n}=" in seen]
    assert channels_seen == ([] if mode != "off" else ["TMUX", "DBUS_SESSION_BUS_ADDRESS"])
    assert json.dumps(CHILD_SECRETS["TMUX"]).strip('"') in hook_out.read_text()  # hooks are not sandboxed
