"""tests/slow_tests.txt (the tests marked `slow` by conftest.py) names only tests that exist, so a renamed or
deleted test never leaves a stale line behind."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def slow_tests() -> set[str]:
    lines = (line.split("#", 1)[0].strip() for line in (ROOT / "tests" / "slow_tests.txt").read_text().splitlines())
    return {line for line in lines if line}


def test_every_line_names_a_test_function_of_an_existing_file():
    missing = []
    for entry in sorted(slow_tests()):
        path, _, name = entry.partition("::")
        file = ROOT / path
        defined = (
            {n.name for n in ast.walk(ast.parse(file.read_text())) if isinstance(n, ast.FunctionDef)}
            if file.is_file()
            else set()
        )
        if name not in defined:
            missing.append(entry)
    assert not missing, f"tests/slow_tests.txt names tests that do not exist: {missing}"
