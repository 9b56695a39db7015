"""No module under openheim/ reaches into another package's private attributes.

A private name (one leading underscore, not a dunder) read as ``x._name`` is ours only when openheim
itself defines ``_name`` somewhere (a def, a class, an assignment, an attribute it sets): then ``x`` is
one of our objects. Anything else is another package's internals, which break when it changes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from source_ast import parse

PACKAGE = Path(__file__).resolve().parents[1] / "openheim"

# Underscore names that are documented public API, each with where it is documented.
DOCUMENTED = {
    "_exit": "os._exit: documented exit without cleanup (a forked child must not run the parent's handlers)",
    "_replace": "typing.NamedTuple / collections.namedtuple: documented method (the TUI's Style values)",
}


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _trees() -> dict[Path, ast.Module]:
    return {p: parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


def _defined_by_us(trees: dict[Path, ast.Module]) -> set[str]:
    """Every private name openheim defines: functions, classes, variables, attributes it assigns."""
    names: set[str] = set()
    for tree in trees.values():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
            elif isinstance(node, ast.alias):
                names.add(node.asname or node.name.split(".")[0])
    return {n for n in names if _private(n)}


def _foreign(tree: ast.Module, ours: set[str]) -> list[tuple[int, str]]:
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            owner = node.value.id if isinstance(node.value, ast.Name) else None
            if owner in ("self", "cls") or node.attr in ours or node.attr in DOCUMENTED:
                continue
            found.append((node.lineno, f"{ast.unparse(node.value)}.{node.attr}"))
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            and len(node.args) >= 2
        ):
            name = node.args[1]
            if (
                isinstance(name, ast.Constant)
                and isinstance(name.value, str)
                and _private(name.value)
                and name.value not in ours
            ):
                found.append((node.lineno, f"{node.func.id}(…, {name.value!r})"))
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.split(".")[0] != "openheim"
        ):
            found += [(node.lineno, f"from {node.module} import {a.name}") for a in node.names if _private(a.name)]
    return found


def test_no_module_reaches_into_another_packages_private_attributes():
    trees = _trees()
    ours = _defined_by_us(trees)
    found = [
        f"{p.relative_to(PACKAGE.parent)}:{line}: {what}"
        for p, tree in trees.items()
        for line, what in _foreign(tree, ours)
    ]
    assert not found, "private attributes of other packages:\n" + "\n".join(found)


@pytest.mark.parametrize(
    "source",
    [
        "resp.raw._fp.read1(10)",
        "sys._getframe(1)",
        "getattr(resp.raw, '_fp', None)",
        "from json.decoder import _scan_once",
        "self.resp._fp",
    ],
)
def test_the_check_catches_reaching_in(source):
    assert _foreign(parse(source), {"_ours"})


@pytest.mark.parametrize("source", ["self._lock", "cls._cache", "other._ours", "x.__class__", "os._exit(0)"])
def test_the_check_lets_our_own_and_documented_names_pass(source):
    assert not _foreign(parse(source), {"_ours"})
