"""Subagents are part of their turn: their tokens are in the turn's usage (json, stream-json, ACP) and count
against --max-tokens-total; at most max_parallel_subagents run at once; delegate_task picks only configured
providers and listed models."""

from __future__ import annotations

import json
import time

import pytest
from acp_wire import AcpWire
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, extra="max_iterations = 6\nmax_parallel_tools = 8")
        yield server


def delegate(*tasks: str, usage: tuple = (100, 10)) -> Reply:
    return Reply(
        tool_calls=[
            ToolCall("delegate_task", {"system_prompt": "You help.", "task": t}, id=f"d{i}")
            for i, t in enumerate(tasks)
        ],
        usage=usage,
    )


def test_json_and_stream_json_report_the_subagents_tokens_too(srv, tmp_path):
    srv.enqueue(delegate("a"), Reply(text="sub answer", usage=(1000, 50)), Reply(text="done", usage=(200, 20)))
    r = openheim("run", "-o", "json", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    usage = json.loads(r.stdout)["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (1300, 80)

    srv.enqueue(delegate("a"), Reply(text="sub answer", usage=(1000, 50)), Reply(text="done", usage=(200, 20)))
    r = openheim("run", "-o", "stream-json", "go", cwd=tmp_path)
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    sub = [e for e in lines if e["type"] == "subagent" and e["event"]["event_type"] == "usage"]
    assert [e["event"]["usage"]["input_tokens"] for e in sub] == [1000]
    assert lines[-1]["usage"]["input_tokens"] == 1300


def test_the_token_budget_stops_a_fan_out_of_subagents(srv, tmp_path):
    srv.enqueue(delegate(*[f"task {i}" for i in range(40)], usage=(10, 5)))
    srv.enqueue(*[Reply(text="sub", usage=(30, 20)) for _ in range(40)])
    r = openheim("run", "-o", "json", "--max-tokens-total", "40", "go", cwd=tmp_path)
    assert r.returncode != 0 or json.loads(r.stdout)["stop_reason"] == "budget", r.stdout
    out = json.loads(r.stdout)
    assert out["stop_reason"] == "budget" and out["usage"]["input_tokens"] >= 10 + 30
    assert len(srv.requests) <= 1 + 4, len(srv.requests)  # the parent, and at most one wave of 4 subagents


def test_at_most_max_parallel_subagents_run_at_once(srv, isolated_home, tmp_path):
    config = isolated_home / "config.toml"
    config.write_text("max_parallel_subagents = 2\n" + config.read_text())
    srv.enqueue(delegate(*[f"task {i}" for i in range(6)]))
    srv.enqueue(*[Reply(text="sub", head_delay=0.4) for _ in range(6)], Reply(text="done"))
    started = time.monotonic()
    r = openheim("run", "go", cwd=tmp_path)
    took = time.monotonic() - started
    assert r.returncode == 0 and r.stdout == "done\n", r.stderr
    assert took >= 3 * 0.4, took  # three waves of two (eight at once would take one wave)


def test_delegate_task_picks_only_listed_models_and_configured_providers(srv, isolated_home, tmp_path):
    config = isolated_home / "config.toml"  # a provider with no models list: only its default_model is listed
    config.write_text(
        config.read_text() + f'[providers.open]\nkind = "openai_compatible"\napi_base = '
        f'"{srv.base_url}"\ndefault_model = "open-model"\napi_key = "k"\n'
    )
    srv.enqueue(
        Reply(
            tool_calls=[
                ToolCall(
                    "delegate_task",
                    {"system_prompt": "x", "task": "t", "provider": "open", "model": "very-expensive-model"},
                    id="a",
                ),
                ToolCall("delegate_task", {"system_prompt": "x", "task": "t", "provider": "elsewhere"}, id="b"),
                ToolCall("delegate_task", {"system_prompt": "x", "task": "t", "model": "other-model"}, id="c"),
            ]
        ),
        Reply(text="sub on other-model"),
        Reply(text="done"),
    )
    r = openheim("run", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in srv.requests[-1].body["messages"] if m["role"] == "tool"]
    assert "'very-expensive-model' of provider 'open' is not one this configuration lists" in results[0]
    assert "Provider 'elsewhere' not found" in results[1]
    assert results[2] == "sub on other-model"
    assert [q.body["model"] for q in srv.requests] == ["fake-model", "other-model", "fake-model"]


def test_acp_prompt_response_carries_the_turns_usage_with_subagents(srv, tmp_path):
    srv.enqueue(delegate("a"), Reply(text="sub answer", usage=(1000, 50)), Reply(text="done", usage=(200, 20)))
    wire = AcpWire()
    try:
        wire.initialize()
        sid = wire.new_session(tmp_path)
        response, _ = wire.prompt(
            sid, "go", on_request=lambda f: {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
        )
    finally:
        wire.close()
    usage = response["result"]["_meta"]["openheim"]["usage"]
    assert (usage["input_tokens"], usage["output_tokens"]) == (1300, 80)
