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
    data.mkdir(mode=0o700)  # as openheim creates it (a looser one is repaired with a line on stderr)
    for var in _SCRUB:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENHEIM_HOME", str(data))
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    return data


SLOW_LIST = ROOT / "tests" / "slow_tests.txt"

# Tests that share something across processes run on one xdist worker, one after another (--dist loadgroup):
# a module-scoped fixture that is costly to start twice, or a build two workers must not run at once.
GROUPS = {
    "serve/test_serve_page.py": "chromium",  # one headless Chromium at a time (a module-scoped browser each)
    "serve/test_serve_page_ux.py": "chromium",
    "serve/test_serve_images.py": "chromium",
    "mcp/test_mcp_client.py": "mcp-client",  # the module's shared client and its MCP server
    "test_typing.py": "mypy",  # one mypy cache for the module
    "packaging/test_portable.py": "portable",  # one (re)build of the portable binary
}


def slow_tests() -> set[str]:
    """``tests/slow_tests.txt``: one ``path::function`` a line (every parameter of it), measured over ~5 s."""
    lines = (line.split("#", 1)[0].strip() for line in SLOW_LIST.read_text().splitlines())
    return {line for line in lines if line}


def pytest_collection_modifyitems(items: list) -> None:
    """Marks from the tables above, then the order: tests of the frozen binary run last (the unit and
    end-to-end tests report before the build starts), and the portable binary's after them (in CI its build
    runs beside everything else, so it gets the most time; its fixture also waits for that build)."""
    slow = slow_tests()
    for item in items:
        where = item.path.relative_to(ROOT / "tests").as_posix()
        if f"tests/{where}::{item.originalname}" in slow:
            item.add_marker(pytest.mark.slow)
        if where in GROUPS:
            item.add_marker(pytest.mark.xdist_group(GROUPS[where]))

    def rank(item: pytest.Item) -> int:
        names = getattr(item, "fixturenames", ())
        return (
            2 if "portable_bin" in names or item.path.name == "test_portable.py" else 1 if "frozen_bin" in names else 0
        )

    items.sort(key=rank)  # stable: the order within each group is kept
