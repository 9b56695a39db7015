"""MCP start-up off the first token's path, through `openheim run` with real servers: remembered tool lists
are offered while a slow server starts, a call to its tool waits for it, a never-seen server is waited for
with a notice, and one that never answers is given up on once, then never waited for again."""
from __future__ import annotations

import time

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from mcp_helpers import new_tag, offered, pids_with, toml_server, wait_until

pytest.importorskip("mcp")


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_a_slow_server_with_a_remembered_list_does_not_hold_the_first_request(srv, isolated_home, tmp_path):
    tag = new_tag()
    write_config(isolated_home, srv.base_url, extra="mcp_startup_timeout_secs = 20\n" +
                 toml_server("slow-one", tag, args=("--delay", "2")))
    first = openheim("run", "hi", cwd=tmp_path)  # never seen: waited for, with a notice
    assert first.returncode == 0, first.stderr
    assert "starting MCP servers: slow-one" in first.stderr
    assert "slow_one__echo" in offered(srv.requests[0])

    srv.enqueue(Reply(tool_calls=[ToolCall("slow_one__echo", {"text": "early"})]), Reply(text="done"))
    started = time.monotonic()
    second = openheim("run", "use echo", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert "starting MCP servers" not in second.stderr
    request, reply = srv.requests[1], srv.requests[2]
    assert "slow_one__echo" in offered(request)  # offered from the remembered list
    assert request.received_at - started < 2.0, "the first request waited for the slow server"
    assert reply.body["messages"][-1]["content"] == "echo: early"  # the call waited for the server
    assert wait_until(lambda: not pids_with(tag), timeout=5)


def test_a_server_that_never_answers_is_given_up_on_once(srv, isolated_home, tmp_path):
    tag = new_tag()
    write_config(isolated_home, srv.base_url, extra="mcp_startup_timeout_secs = 3\n" +
                 toml_server("mute", tag, args=("--delay", "600")))
    first = openheim("run", "hi", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert "starting MCP servers: mute" in first.stderr
    assert "MCP server 'mute' not ready after 3 s; going on without its tools" in first.stderr
    started = time.monotonic()
    second = openheim("run", "hi", cwd=tmp_path)
    assert second.returncode == 0, second.stderr
    assert srv.requests[1].received_at - started < 3.0  # not held for the 3 s
    assert "not ready" not in second.stderr and "starting MCP servers" not in second.stderr
    assert wait_until(lambda: not pids_with(tag), timeout=5)
