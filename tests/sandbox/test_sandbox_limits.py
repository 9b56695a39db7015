"""`[sandbox] limits`: a fork bomb ends at the process limit and the machine stays usable; a normal build
(`make`, `pip install` of a local project) works under the defaults. Driven through `openheim run`."""

from __future__ import annotations

import os
import shutil
import sys
import time
import zipfile
from pathlib import Path

import pytest
from fake_llm import FakeLLMServer, Reply, ToolCall
from sandbox_attack import configure, run_commands

from openheim.sandbox.landlock import landlock_abi

pytestmark = pytest.mark.skipif(landlock_abi() < 1, reason="the kernel has no Landlock (CI requires it)")
BOMB = "bomb() { bomb | bomb & }; bomb; sleep 2; echo bomb-returned"


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def own_processes() -> int:
    return sum(1 for name in os.listdir("/proc") if name.isdigit())


def test_a_fork_bomb_ends_at_the_process_limit(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    configure(isolated_home, srv, "[sandbox.limits]\nprocesses = 48")  # low: this machine is shared
    before = own_processes()
    start = time.monotonic()
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": BOMB}, id="bomb")]))
    results, _ = run_commands(srv, work, ["echo still-usable"])  # the next command, once the bomb has ended
    assert time.monotonic() - start < 60
    assert results[0] == "still-usable\n", results
    results = [m["content"] for m in srv.requests[-1].body["messages"] if m.get("tool_call_id") == "bomb"]
    assert "Resource temporarily unavailable" in results[0] or "fork" in results[0], results[0]
    deadline = time.monotonic() + 10
    while own_processes() > before + 20 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert own_processes() <= before + 20  # nothing of the bomb is left running


MAKEFILE = "all: out.txt\n\nout.txt: in.txt\n\tcp in.txt out.txt\n\techo built >> out.txt\n"
WHEEL_FILES = {
    "tinyproj/__init__.py": "VALUE = 42\n",
    "tinyproj-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: tinyproj\nVersion: 0.1\n",
    "tinyproj-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: hand\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}


def tiny_wheel(path: Path) -> None:
    """A local project's wheel, built by hand (no build backend here has bdist_wheel offline)."""
    with zipfile.ZipFile(path, "w") as whl:
        for name, text in WHEEL_FILES.items():
            whl.writestr(name, text)
        whl.writestr(
            "tinyproj-0.1.dist-info/RECORD",
            "".join(f"{n},,\n" for n in WHEEL_FILES) + "tinyproj-0.1.dist-info/RECORD,,\n",
        )


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_and_pip_install_of_a_local_project_work_under_the_defaults(srv, isolated_home, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (work / "Makefile").write_text(MAKEFILE)
    (work / "in.txt").write_text("source\n")
    tiny_wheel(work / "tinyproj-0.1-py3-none-any.whl")
    configure(isolated_home, srv)
    pip = f"{sys.executable} -m pip install -q --no-index --no-cache-dir --target site ./tinyproj-0.1-py3-none-any.whl"
    results, _ = run_commands(srv, work, ["make", f"{pip} && echo installed"])
    assert (work / "out.txt").read_text() == "source\nbuilt\n", results[0]
    assert "installed" in results[1], results[1]
    assert (Path(work) / "site" / "tinyproj" / "__init__.py").exists()
