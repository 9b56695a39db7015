"""Turn budgets end to end: `openheim run --max-tokens-total / --timeout` (and their config keys and builder
options) stop a model that calls a tool forever with exit 6, the figure reached, and a history that resumes."""

from __future__ import annotations

import json
import subprocess
import time

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

LOOP = 40  # replies that each call a tool: the model never stops on its own


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra="max_iterations = 100")
        yield server


def _looping(srv: FakeLLMServer, **reply: object) -> None:
    srv.enqueue(*[Reply(tool_calls=[ToolCall("list_dir", {}, id=f"call_{i}")], **reply) for i in range(LOOP)])


def _history(home, session_id: str) -> list[dict]:
    path = home / "history" / f"{session_id}.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _assert_no_dangling_call(messages: list[dict]) -> None:
    """Every tool call in the stored log has its result right behind it."""
    for i, m in enumerate(messages):
        calls = [b["id"] for b in m.get("content", []) if b.get("type") == "tool_use"]
        answered = set()
        for later in messages[i + 1 :]:
            if later["role"] != "tool":
                break
            answered |= {b["tool_call_id"] for b in later["content"] if b.get("type") == "tool_result"}
        assert set(calls) <= answered, (m, messages[i + 1 : i + 3])


def _resumes(srv: FakeLLMServer, session_id: str, cwd) -> dict:
    """A follow-up prompt on the stopped session works; returns the request it sent."""
    srv.clear()
    srv.enqueue(Reply(text="resumed fine"))
    before = len(srv.requests)
    r = openheim("run", "--session", session_id, "what now?", cwd=cwd)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "resumed fine\n"
    body = srv.requests[before].body
    assert body["messages"][-1] == {"role": "user", "content": "what now?"}
    return body


def test_token_budget_counts_every_iteration_and_stops_with_exit_6(srv, tmp_path, isolated_home):
    _looping(srv, usage=(100, 20))  # 120 tokens per call: 120, 240, 360 >= 300 at the third call
    r = openheim("run", "-o", "json", "--max-tokens-total", "300", "loop", cwd=tmp_path)
    assert r.returncode == 6, r.stderr
    obj = json.loads(r.stdout)
    assert obj["stop_reason"] == "budget"
    assert obj["budget"] == {"kind": "tokens", "limit": 300, "used": 360}
    assert obj["iterations"] == 3 and len(srv.requests) == 3
    assert obj["usage"]["input_tokens"] == 300 and obj["usage"]["output_tokens"] == 60
    messages = _history(isolated_home, obj["session_id"])
    _assert_no_dangling_call(messages)
    last = messages[-1]
    assert last["role"] == "tool" and "token budget" in last["content"][0]["content"]  # not run
    body = _resumes(srv, obj["session_id"], tmp_path)
    assert sum(1 for m in body["messages"] if m["role"] == "tool") == 3


def test_token_budget_in_config_text_mode_says_one_line(srv, tmp_path, isolated_home):
    write_config(isolated_home, srv.base_url, extra="max_iterations = 100\nmax_tokens_total = 50")
    _looping(srv, usage=(40, 15))
    r = openheim("run", "loop", cwd=tmp_path)
    assert r.returncode == 6
    assert r.stderr.strip() == (
        "openheim: stopped at the turn's token budget: 55 tokens used of 50 (--max-tokens-total / max_tokens_total)"
    )
    assert len(srv.requests) == 1


def test_a_final_answer_over_the_budget_is_still_the_answer(srv, tmp_path):
    srv.enqueue(Reply(text="all done", usage=(500, 20)))
    r = openheim("run", "-o", "json", "--max-tokens-total", "100", "hi", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["stop_reason"] == "end_turn" and obj["text"] == "all done" and "budget" not in obj


def test_time_budget_cancels_the_running_stream_and_stops_with_exit_6(srv, tmp_path, isolated_home):
    _looping(srv, delay=0.05)  # each reply streams for a while; together far beyond the budget
    srv.enqueue(Reply(text="word " * 400, delay=0.05))
    started = time.monotonic()
    r = openheim("run", "-o", "json", "--timeout", "1.5", "loop", cwd=tmp_path)
    took = time.monotonic() - started
    assert r.returncode == 6, r.stderr
    obj = json.loads(r.stdout)
    assert obj["stop_reason"] == "budget"
    assert obj["budget"]["kind"] == "time" and obj["budget"]["limit"] == 1.5
    assert 1.5 <= obj["budget"]["elapsed"] < 3
    assert took < 1.5 + 8  # interpreter start-up plus the budget: the loop did not run on
    assert srv.pending > 0  # the model was not asked for everything scripted
    _assert_no_dangling_call(_history(isolated_home, obj["session_id"]))
    body = _resumes(srv, obj["session_id"], tmp_path)
    roles = [m["role"] for m in body["messages"]]
    assert roles.count("user") == 2


def test_time_budget_in_config_ends_stream_json_with_the_figure(srv, tmp_path, isolated_home):
    write_config(isolated_home, srv.base_url, extra="max_iterations = 100\nturn_timeout_secs = 1")
    srv.enqueue(Reply(text="word " * 400, delay=0.05))
    r = openheim("run", "-o", "stream-json", "talk", cwd=tmp_path)
    assert r.returncode == 6, r.stderr
    last = json.loads(r.stdout.splitlines()[-1])
    assert last["type"] == "result" and last["stop_reason"] == "budget"
    assert last["budget"]["kind"] == "time" and last["budget"]["limit"] == 1.0
    assert last["budget"]["elapsed"] >= 1.0


@pytest.mark.parametrize(
    "extra, message",
    [
        ("max_tokens_total = 0", "'max_tokens_total' must be at least 1"),
        ('turn_timeout_secs = "soon"', "'turn_timeout_secs' must be a positive number of seconds"),
    ],
)
def test_bad_budget_keys_are_config_errors(srv, tmp_path, isolated_home, extra, message):
    write_config(isolated_home, srv.base_url, extra=extra)
    r = openheim("run", "hi", cwd=tmp_path)
    assert r.returncode == 2 and message in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_library_builder_budget_is_a_stop_reason(srv, tmp_path, isolated_home):
    from openheim import OpenheimClient
    from openheim.core.models import StopReason

    _looping(srv, usage=(30, 10))
    client = OpenheimClient.builder().config_path(isolated_home / "config.toml").max_tokens_total(100).build()
    with client:
        result = client.new_session(tmp_path).prompt("loop")
    assert result.stop_reason is StopReason.BUDGET
    assert result.budget is not None and result.budget.to_dict() == {"kind": "tokens", "limit": 100, "used": 120}


def test_time_budget_stops_a_running_tool(srv, tmp_path, isolated_home):
    write_config(isolated_home, srv.base_url, extra="max_iterations = 100\nallow_shell = true")
    marker = tmp_path / "finished"
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": f"sleep 20 && touch {marker}"})]))
    started = time.monotonic()
    r = openheim("run", "-o", "json", "--timeout", "1", "wait", cwd=tmp_path)
    assert r.returncode == 6, r.stderr
    assert time.monotonic() - started < 10
    obj = json.loads(r.stdout)
    assert obj["budget"]["kind"] == "time" and obj["iterations"] == 1
    messages = _history(isolated_home, obj["session_id"])
    _assert_no_dangling_call(messages)
    assert "time budget (1s) ran out" in messages[-1]["content"][0]["content"]
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True, check=False).stdout
    assert str(marker) not in ps  # the command's process group was killed, not left running


def test_a_subagent_has_the_token_budget_too_and_says_it_stopped(srv, tmp_path):
    srv.enqueue(
        Reply(
            tool_calls=[ToolCall("delegate_task", {"system_prompt": "You list files.", "task": "list"})], usage=(10, 1)
        )
    )
    _looping(srv, usage=(100, 20))  # the subagent loops: stopped at its third call (11 + 360 >= 300)
    r = openheim("run", "-o", "stream-json", "--max-tokens-total", "300", "go", cwd=tmp_path)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    result = next(e for e in lines if e["type"] == "tool_result" and e["tool_name"] == "delegate_task")["result"]
    assert (
        "[Note: subagent 'inline' stopped at the turn's token budget: 371 tokens used of 300 "
        "(--max-tokens-total / max_tokens_total) — this answer may be incomplete.]"
    ) in result
    # a subagent's calls count against the turn's budget (the parent's 11 tokens and its own 360): the parent
    # makes no further call once it is used up
    last = json.loads(r.stdout.splitlines()[-1])
    assert r.returncode == 6 and last["budget"]["used"] == 371 and last["usage"]["input_tokens"] == 310
    assert len(srv.requests) == 1 + 3
