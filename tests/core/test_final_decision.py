"""One final decision after every approver: a hook's "approve", the mode, rules and the front end's gate never
get a write to the project's protected paths through without a person; and every tool call passes it."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from cli_helpers import fake_provider, openheim
from fake_llm import Reply, ToolCall
from source_ast import parse

PACKAGE = Path(__file__).resolve().parents[2] / "openheim"


def results(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


def writes(*paths: str) -> Reply:
    return Reply(
        tool_calls=[
            ToolCall("write_file", {"path": p, "content": "pwned = true\n"}, id=f"w{i}") for i, p in enumerate(paths)
        ]
    )


def test_a_hooks_approve_does_not_write_protected_paths(isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    hook = tmp_path / "approve.py"
    hook.write_text('import json\nprint(json.dumps({"decision": "approve"}))\n')
    extra = f'[[hooks]]\nevent = "pre_tool"\ncommand = "{sys.executable} {hook}"\n'
    with fake_provider("openai", isolated_home, extra=extra) as srv:
        srv.enqueue(
            writes(".openheim/settings.toml", ".git/hooks/post-checkout", ".mcp.json", "plain.txt"), Reply(text="ok")
        )
        r = openheim("run", "--approve", "none", "go", cwd=work)
        assert r.returncode == 0, r.stderr
        got = results(srv.requests[1])
    assert got[0].startswith("Permission denied: .openheim/settings.toml is the project's openheim configuration")
    assert got[1].startswith("Permission denied: .git/hooks/post-checkout is part of the project's configuration")
    assert got[2].startswith("Permission denied: .mcp.json")
    assert not (work / ".openheim").exists() and not (work / ".git").exists() and not (work / ".mcp.json").exists()
    assert (work / "plain.txt").read_text() == "pwned = true\n"  # the hook's approve still counts elsewhere


def test_approve_all_and_an_allow_rule_do_not_write_git_hooks(isolated_home, tmp_path):
    with fake_provider("openai", isolated_home) as srv:
        srv.enqueue(writes(".git/hooks/pre-commit", ".claude/hooks/x.sh"), Reply(text="ok"))
        r = openheim("run", "--approve", "all", "--allow", "write_file", "go", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        got = results(srv.requests[1])
    assert all(x.startswith("Permission denied:") for x in got), got
    assert not (tmp_path / ".git").exists() and not (tmp_path / ".claude").exists()


def _functions(tree: ast.AST) -> list[ast.FunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]


def _calls(fn: ast.AST, attr: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(fn)
        if isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == attr)
            or (isinstance(n.func, ast.Name) and n.func.id == attr)
        )
    ]


def test_every_tool_execution_passes_the_final_decision():
    """A tool call runs through ``executor.execute(name, arguments, ctx)``: every caller is either an executor
    layer delegating (a method named execute) or execute_one, which asks _permitted first; _permitted ends in
    final_decision; and whoever asks a gate (``gate.request``) also calls final_decision."""
    runners: list[str] = []
    gate_askers: list[tuple[str, bool]] = []
    permitted_calls_final = False
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = parse(path.read_text(encoding="utf-8"), str(path))
        for fn in _functions(tree):
            if fn.name != "execute" and any(len(c.args) == 3 for c in _calls(fn, "execute")):
                runners.append(f"{path.relative_to(PACKAGE)}:{fn.name}")
                names = [c.func.id for c in ast.walk(fn) if isinstance(c, ast.Call) and isinstance(c.func, ast.Name)]
                assert "_permitted" in names, f"{path}:{fn.name} runs a tool without _permitted"
            if fn.name == "_permitted" and path.name == "tool_calls.py":
                permitted_calls_final = bool(_calls(fn, "final_decision"))
            for call in _calls(fn, "request"):
                receiver = call.func.value if isinstance(call.func, ast.Attribute) else None
                if isinstance(receiver, ast.Name) and receiver.id == "gate":
                    gate_askers.append((f"{path.relative_to(PACKAGE)}:{fn.name}", bool(_calls(fn, "final_decision"))))
    assert runners == ["core/tool_calls.py:execute_one"], runners
    assert permitted_calls_final
    assert gate_askers and all(ok for _, ok in gate_askers), gate_askers
