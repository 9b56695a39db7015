"""MCP end to end through the CLI: `openheim run` against the fake LLM server calls real MCP servers;
--mcp-config, a project's .mcp.json and `openheim mcp trust`; `openheim mcp` status; no orphan processes."""

from __future__ import annotations

import json
import signal
import time

import pytest
from cli_helpers import openheim, spawn, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from mcp_helpers import PYTHON, SERVER, new_tag, offered, pids_with, toml_server, wait_until

pytest.importorskip("mcp")


def tool_message(request) -> str:
    return request.body["messages"][-1]["content"]


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_run_calls_an_mcp_tool_and_uses_its_answer_then_leaves_no_process(srv, isolated_home, tmp_path):
    tag = new_tag()
    write_config(isolated_home, srv.base_url, extra=toml_server("fake", tag))
    srv.enqueue(Reply(tool_calls=[ToolCall("fake__echo", {"text": "from the model"})]), Reply(text="It echoed."))
    r = openheim("run", "-v", "use the echo tool", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "It echoed.\n"
    assert "fake__echo" in offered(srv.requests[0]) and "read_file" in offered(srv.requests[0])
    assert tool_message(srv.requests[1]) == "echo: from the model"
    assert "Traceback" not in r.stderr
    assert wait_until(lambda: not pids_with(tag), timeout=5), "an MCP server outlived openheim run"


def test_mcp_config_file_and_approve_reads(srv, isolated_home, tmp_path):
    """--mcp-config FILE (the mcpServers JSON of other clients); --approve reads runs only readOnlyHint tools."""
    write_config(isolated_home, srv.base_url)
    file = tmp_path / "servers.json"
    file.write_text(json.dumps({"mcpServers": {"tools": {"command": PYTHON, "args": [SERVER]}}}))
    srv.enqueue(
        Reply(tool_calls=[ToolCall("tools__peek", {"path": "a"}), ToolCall("tools__echo", {"text": "b"})]),
        Reply(text="done"),
    )
    r = openheim("--mcp-config", str(file), "run", "--approve", "reads", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    results = [m["content"] for m in srv.requests[1].body["messages"] if m["role"] == "tool"]
    assert results[0] == "peeked at a"
    assert "Permission denied by policy (--approve reads)" in results[1]


def test_a_bad_mcp_config_file_is_a_one_line_usage_error(srv, isolated_home, tmp_path):
    write_config(isolated_home, srv.base_url)
    (tmp_path / "bad.json").write_text("{not json")
    r = openheim("--mcp-config", str(tmp_path / "bad.json"), "run", "hi", cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "is not valid JSON" in r.stderr


def test_a_project_mcp_json_is_used_only_once_trusted(srv, isolated_home, tmp_path):
    write_config(isolated_home, srv.base_url)
    project = tmp_path / "repo"
    project.mkdir()
    file = project / ".mcp.json"
    file.write_text(json.dumps({"mcpServers": {"proj": {"command": PYTHON, "args": [SERVER]}}}))

    r = openheim("run", "hi", cwd=project)
    assert r.returncode == 0, r.stderr
    notices = [line for line in r.stderr.splitlines() if "openheim mcp trust" in line]
    assert len(notices) == 1 and "not used until you trust the file" in notices[0]
    assert not any(n.startswith("proj__") for n in offered(srv.requests[-1]))

    t = openheim("mcp", "trust", cwd=project)
    assert t.returncode == 0, t.stderr
    assert f"Trusted {file.resolve()}" in t.stdout and f"proj: {PYTHON} {SERVER}" in t.stdout

    srv.enqueue(Reply(tool_calls=[ToolCall("proj__echo", {"text": "trusted"})]), Reply(text="ok"))
    r = openheim("run", "hi", cwd=project)
    assert r.returncode == 0, r.stderr
    assert "openheim mcp trust" not in r.stderr
    assert tool_message(srv.requests[-1]) == "echo: trusted"

    file.write_text(file.read_text().replace("proj", "proj2"))
    r = openheim("run", "hi", cwd=project)
    assert "changed since you trusted it" in r.stderr
    assert not any(n.startswith("proj") and "__" in n for n in offered(srv.requests[-1]))

    u = openheim("mcp", "untrust", cwd=project)
    assert u.returncode == 0 and "no longer trusted" in u.stdout


def test_mcp_status_table_and_json(isolated_home, tmp_path):
    write_config(
        isolated_home,
        "http://127.0.0.1:9/v1",
        extra=toml_server("fake") + '\n[mcp_servers.gone]\ncommand = "/nonexistent/mcp-server"\n',
    )
    r = openheim("mcp", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["NAME", "SOURCE", "TRANSPORT", "STATE", "TOOLS", "DETAIL"]
    fake = next(line for line in lines if line.startswith("fake "))
    assert fake.split()[:5] == ["fake", "config", "stdio", "connected", "14"]
    gone = next(line for line in lines if line.startswith("gone "))
    assert "failed" in gone and "MCP spawn 'gone' failed" in gone
    j = openheim("mcp", "--json", cwd=tmp_path)
    servers = {s["name"]: s for s in json.loads(j.stdout)["servers"]}
    assert servers["fake"]["connected"] is True and servers["fake"]["tool_count"] == len(servers["fake"]["tools"]) == 14
    assert "fake__echo" in servers["fake"]["tools"] and servers["fake"]["command"] == PYTHON
    assert servers["gone"]["connected"] is False and servers["gone"]["error"].startswith("MCP spawn")
    assert "args" not in servers["fake"]


def test_mcp_status_needs_no_api_key_and_says_when_there_is_nothing(isolated_home, tmp_path):
    (isolated_home / "config.toml").write_text(
        'default_provider = "openai"\n[providers.openai]\napi_base = "https://api.openai.com/v1"\n'
        'default_model = "gpt-4o"\nenv_var = "OPENAI_API_KEY"\n'
    )
    r = openheim("mcp", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("No MCP servers configured.")


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_mid_call_ends_every_server(srv, isolated_home, tmp_path, sig):
    tag = new_tag()
    write_config(isolated_home, srv.base_url, extra=toml_server("fake", tag))
    srv.enqueue(Reply(tool_calls=[ToolCall("fake__sleep", {"seconds": 60})]), Reply(text="never"))
    proc = spawn("run", "go", cwd=tmp_path)
    try:
        assert wait_until(lambda: len(srv.requests) >= 1 and pids_with(tag), timeout=30)
        time.sleep(0.5)  # the call is in flight
        proc.send_signal(sig)  # Ctrl-C reaches openheim only: its servers run in sessions of their own
        proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 128 + sig
    assert wait_until(lambda: not pids_with(tag), timeout=5)
