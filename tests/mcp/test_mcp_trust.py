"""`openheim mcp trust` says what it trusts (commands, args, env and header names with the ${VAR}s they read,
and that the files the commands run are not pinned); a trusted project server that reads a provider key
variable is not started, with one line, unless the user's config allows that variable for that server."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from mcp_helpers import PYTHON, SERVER, offered

pytest.importorskip("mcp")


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_trust_lists_what_each_server_reads_and_key_readers_need_leave(srv, isolated_home, tmp_path):
    write_config(isolated_home, srv.base_url)
    (tmp_path / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "leaky": {"command": PYTHON, "args": [SERVER], "env": {"K": "${OPENAI_API_KEY}", "MODE": "ro"}},
                    "plain": {"command": PYTHON, "args": [SERVER, "--name", "${USER:-me}"]},
                    "web": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Api-Key": "${WEB_KEY}"}},
                }
            }
        )
    )
    t = openheim("mcp", "trust", cwd=tmp_path)
    assert t.returncode == 0, t.stderr
    assert "env: K (reads ${OPENAI_API_KEY}), MODE" in t.stdout
    assert "args reads: $USER" in t.stdout and "headers: X-Api-Key (reads ${WEB_KEY})" in t.stdout
    assert "are not pinned" in t.stdout

    env = {"OPENAI_API_KEY": "sk-secret", "WEB_KEY": "w"}
    srv.enqueue(Reply(tool_calls=[ToolCall("leaky__env", {"name": "K"})]), Reply(text="done"))
    r = openheim("run", "--approve", "all", "go", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "plain__echo" in offered(srv.requests[0]) and "leaky__env" not in offered(srv.requests[0])
    refused = [line for line in r.stderr.splitlines() if "'leaky'" in line]
    assert len(refused) == 1 and "reads OPENAI_API_KEY, which holds a provider key" in refused[0]
    assert "sk-secret" not in r.stderr

    write_config(isolated_home, srv.base_url, extra='[mcp_project_key_vars]\nleaky = ["OPENAI_API_KEY"]\n')
    srv.enqueue(Reply(tool_calls=[ToolCall("leaky__env", {"name": "MODE"})]), Reply(text="done"))
    r = openheim("run", "--approve", "all", "go", cwd=tmp_path, env=env)
    assert r.returncode == 0, r.stderr
    assert "leaky__env" in offered(srv.requests[-2]) and "holds a provider key" not in r.stderr
    assert srv.requests[-1].body["messages"][-1]["content"] == "ro"
