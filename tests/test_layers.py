"""The package's layers, checked from every import statement (lazy ones inside functions included).

Top to bottom: front ends → client (the door) → runtime → tools / conversation / memory / mcp /
subagents → core → config → errors. Nothing imports a layer above its own, and front ends reach the
runtime only through ``OpenheimClient`` and the ``Turn`` it hands out.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "openheim"

LAYERS = {
    "errors": 0,
    "config": 1,
    "core": 2,
    "tools": 3, "conversation": 3, "memory": 3, "mcp": 3, "subagents": 3,
    "runtime": 4,
    "client": 5,
    "acp": 6, "transport": 6, "tui": 6, "cli": 6, "doctor": 6,
}
FRONT_END = 6
# The ACP vocabulary (content blocks, tool calls, updates, replays) is pure mapping over core's types:
# the door offers it to embedders (SessionHandle.acp_updates / acp_replay), so it sits beside the door.
ACP_VOCABULARY = {"openheim.acp.convert", "openheim.acp.toolcalls", "openheim.acp.updates", "openheim.acp.util"}
PUBLIC_RUNTIME = {"openheim.runtime.turn"}  # the Turn a front end iterates is part of the door


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(name: str) -> int | None:
    """The layer of ``openheim.X...``; a feature package's ``cli`` module is a front end."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "openheim":
        return None
    if ".".join(parts[:3]) in ACP_VOCABULARY:
        return LAYERS["client"]
    if parts[-1] == "cli":
        return FRONT_END
    return LAYERS.get(parts[1])


def imports_of(path: Path) -> set[str]:
    """Every openheim module named by an import statement anywhere in the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in found if n.startswith("openheim.")}


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
    upward = sorted(i for i in imports_of(path) if (layer_of(i) or 0) > own and layer_of(i) != FRONT_END
                    or (layer_of(i) == FRONT_END and own < FRONT_END))
    assert not upward, f"{name} (layer {own}) imports from above: {upward}"


FRONT_ENDS = [p for p in modules() if layer_of(module_name(p)) == FRONT_END]


@pytest.mark.parametrize("path", FRONT_ENDS, ids=lambda p: module_name(p))
def test_front_ends_go_through_the_client(path):
    name = module_name(path)
    internal = sorted(i for i in imports_of(path)
                      if i.startswith("openheim.runtime") and not any(i.startswith(p) for p in PUBLIC_RUNTIME))
    assert not internal, f"{name} reaches runtime internals: {internal}; go through OpenheimClient"
    text = path.read_text(encoding="utf-8")
    assert "client.state" not in text and ".state." not in text, f"{name} touches the client's internal state"


def test_core_imports_only_config_and_errors():
    for path in (PACKAGE / "core").rglob("*.py"):
        for i in imports_of(path):
            assert i.split(".")[1] in ("core", "config", "errors"), f"{module_name(path)} imports {i}"


def test_only_the_builder_constructs_the_runtime():
    """Every front end and transport builds its state through OpenheimClient.builder(): nothing but the
    door imports the runtime's builder or creates an AgentState by hand."""
    door = {PACKAGE / "client.py"}
    for path in modules():
        if path in door or "runtime" in path.relative_to(PACKAGE).parts:
            continue
        assert "openheim.runtime.build" not in imports_of(path), f"{module_name(path)} imports the runtime builder"
        assert "AgentState(" not in path.read_text(encoding="utf-8"), f"{module_name(path)} builds an AgentState"
