"""The package type-checks with mypy (the settings in pyproject.toml), and so does code that uses its public API."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytest.importorskip("mypy")


def mypy(*args: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "MYPYPATH": "", "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "mypy", "--cache-dir", str(cache), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("mypy-cache")


def test_the_package_is_mypy_clean(cache):
    result = mypy(cwd=ROOT, cache=cache)  # [tool.mypy] names the package and the settings
    assert result.returncode == 0, result.stdout + result.stderr


def test_py_typed_ships_with_the_package():
    assert (ROOT / "openheim" / "py.typed").is_file()
    assert '"openheim" = ["py.typed"]' in (ROOT / "pyproject.toml").read_text()


USER_CODE = '''
import queue
from typing import assert_type

import openheim
from openheim import AgentResult, OpenheimClient, SessionHandle, StreamEvent, tool


@tool
def shout(text: str) -> str:
    """Upper-case text."""
    return text.upper()


client = OpenheimClient.builder().api_key("k").model("m").max_iterations(3).tool(shout).build()
with client:
    session = client.new_session()
    assert_type(session, SessionHandle)
    result = session.prompt("hi")
    assert_type(result, AgentResult)
    events: queue.Queue[StreamEvent] = queue.Queue()
    session.prompt("again", on_event=events.put)
    usage = session.context_usage()
    for event in session.stream("more"):
        print(event)
    assert_type(openheim.__version__, str)
'''

WRONG_CODE = '''
from openheim import OpenheimClient

client = OpenheimClient.builder().max_iterations("three").build()
client.new_session().prompt(42)
'''


def test_user_code_type_checks_against_the_public_api(tmp_path, cache):
    (tmp_path / "user.py").write_text(textwrap.dedent(USER_CODE))
    result = mypy("--strict", "--follow-imports=silent", "user.py", cwd=tmp_path, cache=cache)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mistakes_in_user_code_are_caught(tmp_path, cache):
    """Proof that the public names carry their types (a lazily resolved name would be ``object`` or Any)."""
    (tmp_path / "wrong.py").write_text(textwrap.dedent(WRONG_CODE))
    result = mypy("--follow-imports=silent", "wrong.py", cwd=tmp_path, cache=cache)
    assert result.returncode == 1
    assert 'incompatible type "str"; expected "int' in result.stdout
    assert 'incompatible type "int"' in result.stdout
