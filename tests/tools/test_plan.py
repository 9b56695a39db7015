"""update_plan through `openheim run`: a stream-json `plan` event with the whole list; a malformed plan is an
error result the model reads (the run goes on)."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def test_stream_json_has_a_plan_event(srv, tmp_path):
    plan = {
        "plan": [{"step": "read", "status": "completed"}, {"step": "write", "status": "in_progress"}],
        "explanation": "halfway",
    }
    srv.enqueue(Reply(tool_calls=[ToolCall("update_plan", plan)]), Reply(text="ok"))
    r = openheim("run", "-o", "stream-json", "--approve", "reads", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    (event,) = [line for line in lines if line["type"] == "plan"]
    assert event == {
        "type": "plan",
        "schema_version": 1,
        "explanation": "halfway",
        "entries": [{"step": "read", "status": "completed"}, {"step": "write", "status": "in_progress"}],
    }
    result = next(line for line in lines if line["type"] == "tool_result")
    assert result["result"] == "Plan updated (1 of 2 steps completed):\n✓ read\n▸ write"
    assert lines[-1]["denied"] == []  # read-only: --approve reads lets it run


@pytest.mark.parametrize(
    ("plan", "message"),
    [
        ({"plan": []}, "'plan' must be a non-empty array"),
        ({"plan": [{"step": "a", "status": "doing"}]}, 'status "doing"; use one of pending, in_progress, completed'),
        (
            {"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]},
            "at most one plan step can be in_progress",
        ),
    ],
)
def test_a_malformed_plan_is_an_error_result(srv, tmp_path, plan, message):
    srv.enqueue(Reply(tool_calls=[ToolCall("update_plan", plan)]), Reply(text="ok"))
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    assert r.returncode == 0
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert not [line for line in lines if line["type"] == "plan"]
    result = next(line for line in lines if line["type"] == "tool_result")
    assert result["is_error"] and message in result["result"]
