"""Subagents: profiles (TOML and YAML frontmatter), delegate_task end to end through `openheim run`,
ACP and the library, with the fake LLM server scripting both the parent's and the subagent's turns."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
from acp_wire import AcpWire, updates
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim import OpenheimClient
from openheim.core.events import SubagentEvent, ToolResult, UsageReport
from openheim.core.models import StopReason
from openheim.subagents.profiles import ProfileError, load_profiles, parse_profile

REVIEWER_TOML = """+++
description = "Reviews code for bugs"
tools = ["read_file", "search"]
max_iterations = 4
+++
You are a careful code reviewer. Report bugs only.
"""

WRITER_YAML = """---
name: writer
description: Writes release notes
tools: Read, Write
model: inherit
---
You write short release notes.
"""


# --- profiles -------------------------------------------------------------------------


def test_toml_and_yaml_profiles_load_sorted_and_broken_ones_are_skipped(tmp_path, caplog):
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "reviewer.md").write_text(REVIEWER_TOML)
    (agents / "notes.md").write_text(WRITER_YAML)
    (agents / "plain.md").write_text("Just a prompt, no frontmatter.\n")
    (agents / "broken.md").write_text("+++\ndescription = 'never closed'\nYou are broken.\n")
    (agents / "badtoml.md").write_text("+++\ndescription = \n+++\nbody\n")
    (agents / "empty.md").write_text("---\ndescription: nothing after\n---\n   \n")
    (agents / "ignored.txt").write_text("not a profile")
    with caplog.at_level(logging.WARNING):
        profiles = load_profiles(agents)
    assert [p.name for p in profiles] == ["empty", "plain", "reviewer", "writer"]
    empty = profiles[0]  # frontmatter and no body: loaded with an empty prompt, as upstream does
    assert empty.system_prompt == "" and empty.description == "nothing after"
    profiles = profiles[1:]
    reviewer = profiles[1]
    assert reviewer.tools == ("read_file", "search") and reviewer.max_iterations == 4
    assert reviewer.description == "Reviews code for bugs"
    assert reviewer.system_prompt == "You are a careful code reviewer. Report bugs only."
    writer = profiles[2]
    assert writer.tools == ("read_file", "write_file") and writer.model is None  # aliases mapped; inherit
    warned = "\n".join(r.getMessage() for r in caplog.records)
    for name, problem in (("broken.md", "unterminated '+++' frontmatter block"), ("badtoml.md", "invalid frontmatter")):
        assert name in warned and problem in warned
    assert "empty.md" not in warned


def test_yaml_tools_as_a_list_and_missing_directory():
    profile = parse_profile("x", "---\ntools:\n  - read_file\n  - Grep\nmax_iterations: 2\n---\nPrompt.\n")
    assert profile.tools == ("read_file", "search") and profile.max_iterations == 2
    with pytest.raises(ProfileError, match="max_iterations"):
        parse_profile("x", "+++\nmax_iterations = 0\n+++\nPrompt.\n")
    assert load_profiles(Path("/nonexistent/agents")) == []


# --- through `openheim run` ---------------------------------------------------------------


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra="max_iterations = 6")
        agents = isolated_home / "agents"
        agents.mkdir()
        (agents / "reviewer.md").write_text(REVIEWER_TOML)
        yield server


def test_delegation_to_a_profile_end_to_end(srv, tmp_path):
    (tmp_path / "app.py").write_text("print('hi')\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("delegate_task", {"agent": "reviewer", "task": "Review app.py"}, id="d1")]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "app.py"}, id="r1")]),  # the subagent reads
        Reply(text="No bugs found."),  # the subagent answers
        Reply(text="The reviewer found no bugs."),  # the parent answers
    )
    r = openheim("run", "-v", "-o", "stream-json", "review app.py", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    sub = [e for e in lines if e["type"] == "subagent" and e["event"]["event_type"] != "usage"]
    assert [e["event"]["event_type"] for e in sub] == ["tool_call", "tool_result"]
    assert sub[0]["subagent"] == "reviewer" and sub[0]["parent_tool_call_id"] == "d1"
    assert sub[1]["event"]["result"] == "print('hi')\n"
    parent_result = next(e for e in lines if e["type"] == "tool_result" and e["tool_name"] == "delegate_task")
    assert parent_result["result"] == "No bugs found." and not parent_result["is_error"]
    assert lines[-1]["text"] == "The reviewer found no bugs."
    assert "  ⚙ [reviewer] read_file" in r.stderr and "    → print('hi')" in r.stderr
    # the subagent's request: its own system prompt, the task as the only user message, narrowed tools
    sub_request = srv.requests[1].body
    assert sub_request["messages"][0] == {
        "role": "system",
        "content": "You are a careful code reviewer. Report bugs only.",
    }
    assert sub_request["messages"][1]["content"] == "Review app.py"
    assert sorted(t["function"]["name"] for t in sub_request["tools"]) == ["read_file", "search"]
    parent_tools = {t["function"]["name"] for t in srv.requests[0].body["tools"]}
    assert "delegate_task" in parent_tools
    assert (
        "reviewer"
        in next(t for t in srv.requests[0].body["tools"] if t["function"]["name"] == "delegate_task")["function"][
            "description"
        ]
    )


def test_inline_subagent_with_narrowed_tools_and_the_iteration_limit(srv, tmp_path):
    srv.enqueue(
        Reply(
            tool_calls=[
                ToolCall(
                    "delegate_task",
                    {
                        "system_prompt": "You list files.",
                        "task": "write x",
                        "tools": ["list_dir"],
                        "max_iterations": 50,
                    },
                )
            ]
        ),
        Reply(tool_calls=[ToolCall("write_file", {"path": "x.txt", "content": "x"})]),  # not allowed to it
        Reply(tool_calls=[ToolCall("list_dir", {})]),
        Reply(tool_calls=[ToolCall("list_dir", {})]),
        Reply(tool_calls=[ToolCall("list_dir", {})]),
        Reply(tool_calls=[ToolCall("list_dir", {})]),
        Reply(tool_calls=[ToolCall("list_dir", {})]),  # its 6th iteration: the parent's limit
        Reply(text="done"),
    )
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    refused = next(e for e in lines if e["type"] == "subagent" and e["event"]["event_type"] == "tool_result")
    assert refused["subagent"] == "inline" and refused["event"]["is_error"]
    assert "Tool 'write_file' is not available to this agent. Available tools: list_dir" in refused["event"]["result"]
    result = next(e for e in lines if e["type"] == "tool_result" and e["tool_name"] == "delegate_task")["result"]
    assert "[Note: subagent 'inline' reached its iteration limit (6) before finishing" in result
    assert "[Note: max_iterations 50 is above this session's limit; subagent 'inline' ran with 6.]" in result
    assert not (tmp_path / "x.txt").exists()


@pytest.mark.parametrize(
    "args,expected",
    [
        ({"agent": "nobody", "task": "t"}, "Unknown subagent 'nobody'. Available subagents: reviewer."),
        ({"agent": "reviewer", "system_prompt": "x", "task": "t"}, "Pass either 'agent' or 'system_prompt', not both."),
        ({"task": "t"}, "Missing subagent: pass 'agent' (one of: reviewer)"),
    ],
)
def test_refusals_are_text_the_model_reads(srv, tmp_path, args, expected):
    srv.enqueue(Reply(tool_calls=[ToolCall("delegate_task", args)]), Reply(text="ok"))
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    result = next(json.loads(line) for line in r.stdout.splitlines() if '"tool_result"' in line)
    assert result["result"].startswith(expected) and not result["is_error"]


def test_missing_task_is_a_tool_error(srv, tmp_path):
    srv.enqueue(Reply(tool_calls=[ToolCall("delegate_task", {"agent": "reviewer"})]), Reply(text="ok"))
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    result = next(json.loads(line) for line in r.stdout.splitlines() if '"tool_result"' in line)
    assert result["is_error"] and "missing 'task' argument" in result["result"]


def test_architect_mode_hides_delegate_task(srv, isolated_home, tmp_path):
    with OpenheimClient.builder().build() as client:
        session = client.new_session(cwd=tmp_path)
        session.set_mode("architect")
        session.prompt("plan")
    assert "delegate_task" not in {t["function"]["name"] for t in srv.requests[0].body["tools"]}


def test_cancelling_the_parent_cancels_the_subagent(srv, isolated_home, tmp_path):
    srv.enqueue(
        Reply(tool_calls=[ToolCall("delegate_task", {"agent": "reviewer", "task": "slow"})]),
        Reply(text=" ".join(["thinking"] * 400), delay=0.05),
    )
    with OpenheimClient.builder().build() as client:
        turn = client.new_session(cwd=tmp_path).start_turn("go")
        deadline = time.monotonic() + 10
        while len(srv.requests) < 2 and time.monotonic() < deadline:  # the subagent is streaming
            time.sleep(0.02)
        started = time.monotonic()
        turn.cancel()
        assert turn.wait(1.0) and turn.result.stop_reason is StopReason.CANCELLED
        assert turn.join(2.0), "the worker (and the subagent in it) did not stop"
    assert time.monotonic() - started < 2.0
    assert len(srv.requests) == 2  # nothing was sent after the cancel


def test_library_sees_subagent_events(srv, isolated_home, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("delegate_task", {"agent": "reviewer", "task": "read a.txt"}, id="p1")]),
        Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]),
        Reply(text="alpha"),
        Reply(text="ok"),
    )
    with OpenheimClient.builder().build() as client:
        events = list(client.new_session(cwd=tmp_path).start_turn("go"))
    sub = [e for e in events if isinstance(e, SubagentEvent) and not isinstance(e.event, UsageReport)]
    assert [type(e.event).__name__ for e in sub] == ["ToolCall", "ToolResult"]
    assert sub[1].event.result == "alpha\n" and sub[1].parent_tool_call_id == "p1"
    assert next(e for e in events if isinstance(e, ToolResult)).result == "alpha"


# --- ACP: the subagent's permission requests reach the client with its name -------------------


def test_acp_shows_subagent_calls_and_asks_permission_naming_the_subagent(isolated_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url)
        (isolated_home / "agents").mkdir()
        (isolated_home / "agents" / "scribe.md").write_text("---\ndescription: writes notes\n---\nYou write notes.\n")
        srv.enqueue(
            Reply(tool_calls=[ToolCall("delegate_task", {"agent": "scribe", "task": "write notes.md"}, id="d7")]),
            Reply(tool_calls=[ToolCall("write_file", {"path": "notes.md", "content": "n\n"}, id="w1")]),
            Reply(text="written"),
            Reply(text="The scribe wrote notes.md."),
        )
        wire = AcpWire()
        try:
            wire.initialize()
            sid = wire.new_session(project.resolve())
            asked = []

            def answer(frame):
                asked.append(frame)
                return {"outcome": {"outcome": "selected", "optionId": "allow_once"}}

            response, frames = wire.prompt(sid, "take notes", on_request=answer)
        finally:
            wire.close()
    assert response["result"]["stopReason"] == "end_turn"
    sub_id = "subagent:scribe:d7:w1"
    # the parent's delegate call, then the subagent's write announced with _meta, before the permission request
    calls = updates(frames, "tool_call")
    assert calls[0]["toolCallId"] == "d7" and calls[0]["title"] == "Delegate to scribe: write notes.md"
    assert calls[1]["toolCallId"] == sub_id and calls[1]["title"] == "Write notes.md (subagent scribe)"
    assert calls[1]["_meta"] == {"openheim/parentToolCallId": "d7", "openheim/subagent": "scribe"}
    permissions = [f for f in asked if f["method"] == "session/request_permission"]
    assert [p["params"]["toolCall"]["toolCallId"] for p in permissions] == ["d7", sub_id]
    assert permissions[1]["params"]["toolCall"]["title"] == "Write notes.md (subagent scribe)"
    done = [u for u in updates(frames, "tool_call_update") if u.get("status") == "completed"]
    assert {u["toolCallId"] for u in done} >= {sub_id, "d7"}
    assert (project / "notes.md").read_text() == "n\n"
