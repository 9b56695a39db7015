"""A reply's tool calls run at most max_parallel_tools at once, the rest queued in call order, each cancellable."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.config.schema import parse_config
from openheim.core.models import ToolUseBlock
from openheim.core.tool_calls import CANCELLED_BY_USER, run_tool_calls
from openheim.core.tools import BaseTool, ToolCapabilities, ToolRegistry
from openheim.core.turn_context import TurnContext
from openheim.errors import ConfigError


class Gauge(BaseTool):
    """A tool that holds its slot until released and records how many ran at once and in what order."""

    name = "gauge"
    description = "test"
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}}
    capabilities = ToolCapabilities(read_only=True)

    def __init__(self, hold: float = 0.05) -> None:
        self.hold = hold
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0
        self.started: list[int] = []

    def execute(self, args: dict, ctx) -> str:
        with self.lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
            self.started.append(args["n"])
        try:
            ctx.cancel.wait(self.hold)
            return f"done {args['n']}"
        finally:
            with self.lock:
                self.running -= 1


def calls(n: int) -> list[ToolUseBlock]:
    return [ToolUseBlock(f"c{i}", "gauge", json.dumps({"n": i})) for i in range(n)]


def test_at_most_n_run_at_once_and_the_rest_start_in_call_order():
    gauge = Gauge()
    events: list = []
    finished = run_tool_calls(ToolRegistry([gauge]), calls(30), TurnContext(), events.append, max_parallel=3)
    assert gauge.peak == 3
    assert gauge.started[3:] == sorted(gauge.started[3:]) and sorted(gauge.started[:3]) == [0, 1, 2]
    assert [m.content[0].content for m in finished.messages] == [f"done {i}" for i in range(30)]
    assert len([e for e in events if e.kind == "tool_result"]) == 30


def test_the_default_cap_is_eight():
    gauge = Gauge()
    run_tool_calls(ToolRegistry([gauge]), calls(40), TurnContext(), lambda e: None)
    assert gauge.peak == 8


def test_cancel_answers_running_and_queued_calls_and_starts_no_more():
    gauge = Gauge(hold=30)
    ctx = TurnContext()
    threading.Timer(0.3, ctx.cancel.cancel).start()
    started = time.monotonic()
    finished = run_tool_calls(ToolRegistry([gauge]), calls(50), ctx, lambda e: None, max_parallel=2)
    assert time.monotonic() - started < 2
    assert finished.cancelled
    assert [m.content[0].content for m in finished.messages] == [CANCELLED_BY_USER] * 50
    time.sleep(0.2)
    assert sorted(gauge.started) == [0, 1]  # the queued 48 never ran


@pytest.mark.parametrize(
    "value,message",
    [
        (0, "'max_parallel_tools' must be at least 1"),
        ("8", "'max_parallel_tools' must be an integer"),
        (True, "'max_parallel_tools' must be an integer"),
    ],
)
def test_config_key_is_validated(value, message):
    with pytest.raises(ConfigError, match=message):
        parse_config({"default_provider": "p", "max_parallel_tools": value})


def test_config_key_default_and_value():
    assert parse_config({"default_provider": "p"}).max_parallel_tools == 8
    assert parse_config({"default_provider": "p", "max_parallel_tools": 2}).max_parallel_tools == 2


def test_openheim_run_caps_parallel_shells_from_the_config(isolated_home, tmp_path: Path):
    """Twelve commands in one reply with max_parallel_tools = 3: never more than three shells at once."""
    (tmp_path / "running").mkdir()
    command = "mkdir running/{i} && ls running | wc -l >> counts && sleep 0.3 && rmdir running/{i} && echo ok {i}"
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra="allow_shell = true\nmax_parallel_tools = 3")
        srv.enqueue(
            Reply(tool_calls=[ToolCall("execute_command", {"command": command.format(i=i)}) for i in range(12)]),
            Reply(text="all done"),
        )
        r = openheim("run", "go", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        results = [m for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert [m["content"] for m in results] == [f"ok {i}\n" for i in range(12)]
    counts = [int(n) for n in (tmp_path / "counts").read_text().split()]
    assert max(counts) == 3, counts
