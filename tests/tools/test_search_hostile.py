"""search against a pattern that makes Python's re backtrack for hours: the deadline, cancel and signals still win.

`^(\\w+\\s?)*$` over "a" * 40 + "!" is exponential in Python's re (28 characters took 44 s), and the
pattern is not one rg runs, so the Python engine takes it.
"""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest
from acp_wire import AcpWire, updates
from cli_helpers import spawn, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.core.turn_context import TurnContext
from openheim.errors import ToolExecutionError
from openheim.tools.process import running_groups
from openheim.tools.search import SearchTool
from openheim.tools.search_rg import is_portable

EVIL = r"^(\w+\s?)*$"


@pytest.fixture
def trap(tmp_path: Path) -> Path:
    (tmp_path / "trap.txt").write_text("a" * 40 + "!\n")
    return tmp_path


def test_the_pattern_is_one_the_python_engine_runs():
    assert not is_portable(EVIL)


@pytest.mark.parametrize("rg", ["with rg", "without rg"])
def test_the_deadline_ends_a_runaway_search(trap, monkeypatch, rg):
    if rg == "without rg":
        monkeypatch.setattr("shutil.which", lambda name: None)
    started = time.monotonic()
    with pytest.raises(ToolExecutionError, match="search timed out after 1 seconds and was stopped"):
        SearchTool(timeout=1.0).execute({"pattern": EVIL}, TurnContext(work_dir=trap))
    assert time.monotonic() - started < 2.5
    assert running_groups() == []


def test_cancel_ends_a_runaway_search_at_once(trap):
    ctx = TurnContext(work_dir=trap)
    threading.Timer(0.5, ctx.cancel.cancel).start()
    started = time.monotonic()
    with pytest.raises(ToolExecutionError, match="search cancelled"):
        SearchTool().execute({"pattern": EVIL}, ctx)
    assert time.monotonic() - started < 1.5
    assert running_groups() == []


def test_normal_searches_still_answer_in_the_child(trap):
    (trap / "b.txt").write_text("hello world\n")
    ctx = TurnContext(work_dir=trap)
    assert SearchTool().execute({"pattern": r"\bworld\b"}, ctx) == "b.txt:1: hello world"
    with pytest.raises(ToolExecutionError, match=r"Invalid pattern '\(': missing \)"):
        SearchTool().execute({"pattern": "("}, ctx)


@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_openheim_run_answers_signals_during_a_runaway_search(isolated_home, trap, sig, code):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(tool_calls=[ToolCall("search", {"pattern": EVIL})]), Reply(text="never"))
        proc = spawn("run", "find it", cwd=trap)
        try:
            _wait_for_search(srv)
            sent = time.monotonic()
            proc.send_signal(sig)
            proc.communicate(timeout=10)
            elapsed = time.monotonic() - sent
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == code
    assert elapsed < 2.0, f"openheim took {elapsed:.1f} s to answer {sig.name}"
    assert len(srv.requests) == 1


def _wait_for_search(srv: FakeLLMServer, timeout: float = 10.0) -> None:
    """Until the model's search call has had a second to get deep into backtracking."""
    deadline = time.monotonic() + timeout
    while not srv.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    assert srv.requests, "openheim never asked the model"
    time.sleep(1.0)


def test_acp_stays_responsive_during_a_runaway_search(isolated_home, trap):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        srv.enqueue(Reply(tool_calls=[ToolCall("search", {"pattern": EVIL})]))
        wire = AcpWire()
        try:
            wire.initialize()
            stuck = wire.new_session(trap)
            request = wire.start("session/prompt", {"sessionId": stuck, "prompt": [{"type": "text", "text": "go"}]})
            _wait_for_search(srv)
            other = wire.new_session(trap)  # another session is served meanwhile
            response, _ = wire.prompt(other, "hello", timeout=5)
            assert response["result"]["stopReason"] == "end_turn"
            sent = time.monotonic()
            wire.notify("session/cancel", {"sessionId": stuck})
            response, frames = wire.until_response(request, timeout=5)
            assert response["result"] == {"stopReason": "cancelled"}
            assert time.monotonic() - sent < 1.0
            assert updates(frames, "tool_call_update")[-1]["status"] == "failed"
            srv.enqueue(Reply(tool_calls=[ToolCall("search", {"pattern": EVIL})]))
            wire.start("session/prompt", {"sessionId": stuck, "prompt": [{"type": "text", "text": "more"}]})
            time.sleep(1.0)
        finally:
            closed = time.monotonic()
            code = wire.close(timeout=5)  # stdin EOF ends the agent, a runaway search or not
    assert code == 0 and time.monotonic() - closed < 2.0


def test_searches_beside_a_runaway_one_answer_at_once(trap):
    """Each child answers through its own pipe: no search waits on another's child (or its deadline)."""
    (trap / "b.txt").write_text("hello world\n")

    def run_away() -> None:
        with pytest.raises(ToolExecutionError):
            SearchTool(timeout=2).execute({"pattern": EVIL}, TurnContext(work_dir=trap))

    runaway = threading.Thread(target=run_away)
    runaway.start()
    took: list[float] = []

    def normal() -> None:
        started = time.monotonic()
        assert SearchTool().execute({"pattern": "world"}, TurnContext(work_dir=trap)) == "b.txt:1: hello world"
        took.append(time.monotonic() - started)

    workers = [threading.Thread(target=normal) for _ in range(12)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    runaway.join(10)
    assert len(took) == 12 and max(took) < 2.0, took
