"""Imports sit at the top of the file. An import of one of our own modules inside a function is allowed only
at a named start-up seam: a module a measured path (`openheim run`, `--version`, `acp`) does not need until
later, listed in SEAMS with the reason. A new seam must be added there, with its reason; docs/architecture.md
("Start-up seams") says when one is worth it. Imports under ``if TYPE_CHECKING:`` do not count.
tests/test_light_imports.py checks that the seams keep those modules off the paths users take."""

from __future__ import annotations

import ast
from pathlib import Path

from source_ast import parse

PACKAGE = Path(__file__).resolve().parent.parent / "openheim"
MAX_IN_FUNCTION = 65  # a ratchet: the target is 60 (issue 39); lower it as seams merge

# imported module -> why it loads inside a function
SEAMS = {
    "openheim.cli": "`--version` and the sandbox helper answer before click and the CLI load (__main__)",
    "openheim.sandbox.helper": "the sandbox helper: single-threaded, ctypes; only `openheim sandbox exec` runs it",
    "openheim.tui": "the curses chat: only with no subcommand",
    "openheim.core.tool_view": "how a tool call is shown: with the first tool call, not with a plain prompt",
    "openheim.tools.process": "process-group and ptrace guards (ctypes): with the first tool call",
    "openheim.sandbox.policy": "the shell's sandbox: only when the shell is on",
    "openheim.sandbox.support": "probing the kernel's sandbox support (subprocess, ctypes): only with the shell",
    "openheim.subagents.profiles": "subagent profiles: only when the model delegates a task",
    "openheim.checkpoints.scan": "the checkpoint scan: only when a turn first writes a file",
    "openheim.checkpoints.snapshot": "checkpoint snapshots: only when a turn first writes a file",
    "openheim.checkpoints.store": "the checkpoint store's records: only when a turn changed files",
    "openheim.memory.store": "the memory database (sqlite3, sqlite_vec): on the first memory tool call",
    "openheim.memory.sqlite": "sqlite3 and the sqlite_vec extension: on the first memory tool call",
    "openheim.memory.results": "memory search results: on the first memory search",
    "openheim.core.llm.http": "requests: memory's embeddings client loads it with its first request",
    "openheim.memory.embedding": "the embeddings client: only when [memory] names an embedding provider",
    "openheim.config.recording_file": "the --record/--replay file format: only with those options",
    "openheim.core.llm.tape": "the record/replay transport: only with --record/--replay",
    "openheim.runtime.build": "the runtime's assembly (tools, MCP, memory, sandbox): with the first session, so `acp`"
    " idles without it",
    "openheim.sandbox.launch": "the sandbox helper's start (fork server or one command): only `sandbox exec`",
    "openheim.sandbox.forkserver": "the fork server: only when the helper serves many commands",
    "openheim.memory.setup": "long-term memory: only when [memory] is configured",
    "openheim.memory.tools": "the memory tools: only when [memory] is configured",
    "openheim.tools.builtins": "the built-in tools' registration: with the first session's tools",
    "openheim.core.hooks": "the hook runner: only when a hook is configured",
    "openheim.checkpoints.prune": "pruning old checkpoints: with the first snapshot",
    "openheim.checkpoints.turn": "a turn's checkpoint: only when a turn first writes a file",
    "openheim.checkpoints.undo": "undo: only when the user asks for it",
    "openheim.core.llm.adapters": "the LLM client's adapters: with the first model call",
    "openheim.core.llm.factory": "the LLM client factory (requests, the wire's module): with the first model call",
    "openheim.core.tools": "tool views for a turn's tool calls: with the first call",
    "openheim.mcp.group": "MCP servers: only when one is configured",
    "openheim.mcp.hub": "MCP servers: only when one is configured",
    "openheim.mcp.project": "a project's .mcp.json: only when the project has one",
    "openheim.mcp.prompts": "MCP prompts: only when a server lists them",
    "openheim.mcp.resources": "MCP resources: only when a server lists them",
    "openheim.tui.app": "the curses chat's app: only with no subcommand",
    "openheim.tui.screen": "the curses screen: only with no subcommand",
}

# Being rewritten on another branch (issue 39, item 1): they end with few in-function imports. REMOVE AT MERGE.


def _own_module(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> str | None:
    """The openheim module an import statement names, or None for a third-party or standard one."""
    if isinstance(node, ast.Import):
        return next((a.name for a in node.names if a.name.split(".")[0] == "openheim"), None)
    if node.level:
        base = module.split(".")[: len(module.split(".")) - node.level + is_package]
        return ".".join(base + ([node.module] if node.module else []))
    return node.module if (node.module or "").split(".")[0] == "openheim" else None


def in_function_imports(path: Path, root: Path = PACKAGE.parent) -> list[tuple[int, str]]:
    """(line, module) of every import of our own modules inside a function, outside ``if TYPE_CHECKING:``."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    is_package = parts[-1] == "__init__"
    module = ".".join(parts[:-1] if is_package else parts)
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if in_function and isinstance(child, (ast.Import, ast.ImportFrom)):
                target = _own_module(child, module, is_package)
                if target is not None:
                    found.append((child.lineno, _seam_of(target, child)))
            visit(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    visit(parse(path.read_text(encoding="utf-8"), str(path)), False)
    return found


def _seam_of(target: str, node: ast.Import | ast.ImportFrom) -> str:
    """``from openheim.pkg import module`` names the module, not the package."""
    if isinstance(node, ast.ImportFrom) and len(node.names) == 1 and f"{target}.{node.names[0].name}" in SEAMS:
        return f"{target}.{node.names[0].name}"
    return target


def counted() -> dict[str, list[tuple[int, str]]]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE.parent).as_posix()
        if "__pycache__" in path.parts:
            continue
        found = in_function_imports(path)
        if found:
            out[relative] = found
    return out


def test_few_imports_inside_functions():
    found = counted()
    total = sum(len(v) for v in found.values())
    assert total <= MAX_IN_FUNCTION, f"{total} in-function imports of openheim modules (at most {MAX_IN_FUNCTION})"


def test_every_import_inside_a_function_is_a_named_seam():
    unnamed = [f"{path}:{line} {module}" for path, found in counted().items() for line, module in found]
    unnamed = [u for u in unnamed if u.rsplit(" ", 1)[1] not in SEAMS]
    assert not unnamed, (
        "imports inside functions that are no named start-up seam: hoist them to the top of the file, or add "
        f"the module to SEAMS with the reason a measured path must not load it: {unnamed}"
    )


def test_every_named_seam_is_used():
    used = {module for found in counted().values() for _, module in found}
    pending = {m for m in SEAMS if m not in used}
    assert not pending, f"seams no module uses any more (remove them from SEAMS): {sorted(pending)}"


def test_the_counter_sees_imports_in_functions_and_skips_type_checking(tmp_path):
    """The ast walk above can fail: an import in a nested function counts, one under TYPE_CHECKING does not."""
    sample = tmp_path / "openheim" / "core" / "sample.py"
    sample.parent.mkdir(parents=True)
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "import json\n"
        "from openheim.errors import OpenheimError\n"
        "if TYPE_CHECKING:\n    from openheim.core.models import Message\n"
        "def f():\n    import os\n    def g():\n        from openheim.core import tool_view\n"
        "    from . import models\n"
        "    if TYPE_CHECKING:\n        from openheim.core.tools import BaseTool\n"
    )
    assert in_function_imports(sample, tmp_path) == [(9, "openheim.core.tool_view"), (10, "openheim.core")]
