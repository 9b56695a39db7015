"""A denied tool call is visible to a script: `-o json` and stream-json's `result` list it (tool, rule or mode,
reason), stream-json has a `tool_denied` line, and `run --fail-on-deny` exits 8."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

WRITE = ToolCall("write_file", {"path": "out.txt", "content": "x"}, id="call_w")


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url)
        yield server


def test_json_lists_a_call_the_approve_mode_denied(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[WRITE, ToolCall("list_dir", {}, id="call_l")]), Reply(text="ok"))
    r = openheim("run", "-o", "json", "--approve", "reads", "write it", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["denied"] == [
        {
            "id": "call_w",
            "tool_name": "write_file",
            "by": "approve",
            "mode": "reads",
            "reason": "Permission denied by policy (--approve reads): this tool is not read-only.",
        }
    ]
    assert not (tmp_path / "out.txt").exists()


def test_stream_json_names_the_rule_and_fail_on_deny_exits_8(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[WRITE]), Reply(text="ok"))
    r = openheim("run", "-o", "stream-json", "--deny", "write_file(*.txt)", "--fail-on-deny", "write it", cwd=tmp_path)
    assert r.returncode == 8
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    (denied,) = [line for line in lines if line["type"] == "tool_denied"]
    assert denied["tool_name"] == "write_file" and denied["by"] == "rule" and denied["rule"] == "write_file(*.txt)"
    assert denied["reason"].startswith("Permission denied by rule:")
    result = lines[-1]
    assert result["type"] == "result" and result["stop_reason"] == "end_turn"
    assert [d["rule"] for d in result["denied"]] == ["write_file(*.txt)"]
    assert "1 tool call(s) denied; exiting 8 (--fail-on-deny)" in r.stderr


def test_fail_on_deny_without_a_denial_exits_0(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="ok"))
    r = openheim("run", "--approve", "reads", "--fail-on-deny", "look", cwd=tmp_path)
    assert r.returncode == 0 and r.stdout == "ok\n"
    assert "8    a tool call was denied and --fail-on-deny was given" in openheim("run", "--help").stdout
