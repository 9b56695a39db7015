"""No import circle among our modules: counting the imports a module runs when it loads (top level, not under
``if TYPE_CHECKING:``), no module reaches itself again. A circle means two modules are one concept split in two,
or a shared part belongs in a third module (as search's file walk went to tools/search_files.py, which both
search engines import)."""

from __future__ import annotations

import ast
from pathlib import Path

from source_ast import parse

PACKAGE = Path(__file__).resolve().parent.parent / "openheim"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def load_time_imports(path: Path, names: set[str]) -> set[str]:
    """The openheim modules a module imports when it loads (``from pkg import module`` names the module)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    found: set[str] = set()
    for node in parse(path.read_text(encoding="utf-8"), str(path)).body:
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(up + ([node.module] if node.module else []))
            found.add(base)
            found.update(f"{base}.{a.name}" for a in node.names)
    targets = set()
    for name in found:
        while name and name not in names:
            name = name.rpartition(".")[0]
        if name and name != me and name != "openheim":
            targets.add(name)
    return targets


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def import_graph() -> dict[str, set[str]]:
    paths = sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)
    names = {module_name(p) for p in paths}
    return {module_name(p): load_time_imports(p, names) for p in paths}


def test_no_import_circles():
    found = circles(import_graph())
    assert not found, f"import circles among our modules (counting the imports run at load time): {found}"


def test_the_circle_finder_finds_a_circle_and_skips_type_checking(tmp_path):
    """So the test above can fail: a circle through load-time imports is found, one through TYPE_CHECKING is not."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [{"a", "b", "c"}]
    assert load_time_imports(PACKAGE / "tools" / "search_rg.py", set(import_graph())) == {
        "openheim.core.child_env",
        "openheim.errors",
        "openheim.tools.search_files",
    }  # its CancelToken import sits under TYPE_CHECKING
