"""House rules for the package's shape, held like the layer map: no module over 500 lines, no function over 40
(from its `def` to its last line, docstring included). Split by concept when one grows past them."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "openheim"
MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 40


def modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts)


def test_no_module_is_over_500_lines():
    long = {
        str(p.relative_to(PACKAGE)): n for p in modules() if (n := len(p.read_text().splitlines())) > MAX_FILE_LINES
    }
    assert long == {}, f"split these by concept: {long}"


def test_no_function_is_over_40_lines():
    long = {}
    for path in modules():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}"] = length
    assert long == {}, f"split these into named steps: {long}"
