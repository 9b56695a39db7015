"""Shared fixtures: every test runs with its own OPENHEIM_HOME and no proxies.

Test files live in folders named after the package they test (tests/core/, tests/mcp/, ...; see
tests/README.md). Helpers that are not tests (fake servers, the ACP clients, fixtures modules) are in
tests/support/, which is put on sys.path here, so a test imports them by name: `from fake_llm import ...`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "tests" / "support"))

from frozen_build import frozen_bin  # noqa: F401  (a fixture: the session's one-file binary, built once)

_SCRUB = (
    "OPENHEIM_CONFIG",
    "OPENHEIM_LOG",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "no_proxy",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
)


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch) -> Path:
    """Point OPENHEIM_HOME and HOME at fresh temp dirs so no test sees the real ~/.openheim."""
    home = tmp_path_factory.mktemp("home")
    data = home / ".openheim"
    data.mkdir()
    for var in _SCRUB:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENHEIM_HOME", str(data))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return data


def pytest_collection_modifyitems(items: list) -> None:
    """Tests of the frozen binary run last (the unit and end-to-end tests report before the build starts), and
    the portable binary's after them (in CI its build runs beside everything else, so it gets the most time)."""

    def rank(item: pytest.Item) -> int:
        names = getattr(item, "fixturenames", ())
        return (
            2 if "portable_bin" in names or item.path.name == "test_portable.py" else 1 if "frozen_bin" in names else 0
        )

    items.sort(key=rank)  # stable: the order within each group is kept
