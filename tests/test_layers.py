"""The package's layers are its folders, checked from every import statement (lazy ones inside functions
and those under TYPE_CHECKING included).

Bottom to top: errors/version → config → core → tools, sandbox, conversation, memory, mcp, subagents →
runtime → client (the door) → acp, tui (front ends' own machinery) → serve → commands (one module per
`openheim` subcommand) → cli (the root command) and __main__. Nothing imports a layer above its own, and
front ends reach the runtime only through ``OpenheimClient`` and the ``Turn`` it hands out.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_ast import parse

PACKAGE = Path(__file__).resolve().parent.parent / "openheim"

LAYERS = {
    "errors": 0,
    "version": 0,
    "config": 1,
    "core": 2,
    "tools": 3,
    "sandbox": 3,
    "conversation": 3,
    "memory": 3,
    "mcp": 3,
    "subagents": 3,
    "checkpoints": 3,
    "runtime": 4,
    "client": 5,
    "acp": 6,
    "tui": 6,
    "serve": 7,
    "commands": 8,
    "cli": 9,
    "__main__": 9,
}
FRONT_END = LAYERS["acp"]  # this layer and those above it are front ends
PUBLIC_RUNTIME = {"openheim.runtime.turn", "openheim.runtime.session"}  # the Session and Turn are part of the door
MAX_CIRCLES = 1  # the chat: tui/app.py, commands.py and frame.py import each other in functions


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> int | None:
    """The layer of ``openheim.X...``: the folder (or top-level module) X decides."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "openheim":
        return None
    return LAYERS.get(parts[1])


def imports_of(path: Path) -> set[str]:
    """Every openheim module named by an import statement anywhere in the file."""
    tree = parse(path.read_text(encoding="utf-8"), str(path))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in found if n.startswith("openheim.")}


def test_every_code_folder_is_a_regular_package():
    """A folder without __init__.py imports as a namespace package from a checkout, but the wheel's package
    list and the frozen binary's module collection both leave it out."""
    for folder in {p.parent for p in modules()}:
        assert (folder / "__init__.py").exists(), f"{folder.relative_to(PACKAGE.parent)} has no __init__.py"


def test_the_layers_cover_every_package():
    for path in modules():
        name = module_name(path)
        if name in ("openheim", "openheim.__main__"):
            continue
        assert layer_of(name) is not None, f"{name} belongs to no layer; add it to LAYERS"


@pytest.mark.parametrize("path", modules(), ids=lambda p: module_name(p))
def test_nothing_imports_a_layer_above_its_own(path):
    name = module_name(path)
    own = layer_of(name)
    if own is None:
        return
    upward = sorted(i for i in imports_of(path) if (layer_of(i) or 0) > own)
    assert not upward, f"{name} (layer {own}) imports from above: {upward}"


def import_graph() -> dict[str, set[str]]:
    """Module → the openheim modules it imports (a name that is a module's attribute counts as the module)."""
    names = {module_name(p) for p in modules()}
    graph: dict[str, set[str]] = {}
    for path in modules():
        targets = set()
        for i in imports_of(path):
            while i and i not in names:
                i = i.rpartition(".")[0]
            if i and i != module_name(path) and i != "openheim":
                targets.add(i)
        graph[module_name(path)] = targets
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_few_import_circles():
    found = circles(import_graph())
    assert len(found) <= MAX_CIRCLES, f"{len(found)} import circles (at most {MAX_CIRCLES}): {found}"


FRONT_ENDS = [p for p in modules() if (layer_of(module_name(p)) or 0) >= FRONT_END]


@pytest.mark.parametrize("path", FRONT_ENDS, ids=lambda p: module_name(p))
def test_front_ends_go_through_the_client(path):
    name = module_name(path)
    internal = sorted(
        i
        for i in imports_of(path)
        if i.startswith("openheim.runtime") and not any(i.startswith(p) for p in PUBLIC_RUNTIME)
    )
    assert not internal, f"{name} reaches runtime internals: {internal}; go through OpenheimClient"
    text = path.read_text(encoding="utf-8")
    assert "client.state" not in text and ".state." not in text, f"{name} touches the client's internal state"


def test_core_imports_only_config_and_the_bottom_layer():
    for path in (PACKAGE / "core").rglob("*.py"):
        for i in imports_of(path):
            assert i.split(".")[1] in ("core", "config", "errors"), f"{module_name(path)} imports {i}"


def test_only_the_builder_constructs_the_runtime():
    """Every front end and transport builds its state through OpenheimClient.builder(): nothing but the
    door imports the runtime's builder or creates a Runtime by hand."""
    door = {PACKAGE / "client.py"}
    for path in modules():
        if path in door or "runtime" in path.relative_to(PACKAGE).parts:
            continue
        assert "openheim.runtime.build" not in imports_of(path), f"{module_name(path)} imports the runtime builder"
        assert "Runtime(" not in path.read_text(encoding="utf-8"), f"{module_name(path)} builds a Runtime"
