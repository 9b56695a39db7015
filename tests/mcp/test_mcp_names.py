"""MCP tool names as the user wrote them, through the CLI with the real test server: a server named with a
hyphen is exposed as my_srv__tool, and rules may name it mcp__my-srv__echo, my-srv__* or my_srv__echo;
a rule that matches no tool gets one warning; `permissions explain` knows a trusted project's servers."""

from __future__ import annotations

import json

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from mcp_helpers import PYTHON, SERVER, toml_server

pytest.importorskip("mcp")


def tool_contents(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


@pytest.mark.parametrize("deny", ["mcp__my-srv__echo", "my-srv__*", "my_srv__echo", "mcp:my-srv__echo"])
def test_rules_name_a_hyphenated_server_as_configured_or_as_exposed(srv, isolated_home, tmp_path, deny):
    write_config(isolated_home, srv.base_url, extra=toml_server("my-srv"))
    srv.enqueue(
        Reply(tool_calls=[ToolCall("my_srv__echo", {"text": "a"}), ToolCall("my_srv__peek", {})]), Reply(text="done")
    )
    r = openheim("run", "--approve", "all", "--deny", deny, "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    echo, peek = tool_contents(srv.requests[-1])
    assert "denied" in echo.lower() and deny in echo
    assert (peek == "peeked at .") is (deny != "my-srv__*")
    assert "matches no tool" not in r.stderr


def test_an_allow_with_the_configured_name_and_a_rule_matching_nothing(srv, isolated_home, tmp_path):
    write_config(isolated_home, srv.base_url, extra=toml_server("my-srv"))
    srv.enqueue(Reply(tool_calls=[ToolCall("my_srv__echo", {"text": "a"})]), Reply(text="done"))
    r = openheim(
        "run", "--approve", "none", "--allow", "mcp__my-srv__echo", "--deny", "my-srv__ech", "go", cwd=tmp_path
    )
    assert r.returncode == 0, r.stderr
    assert tool_contents(srv.requests[-1]) == ["echo: a"]
    warnings = [line for line in r.stderr.splitlines() if "matches no tool" in line]
    assert len(warnings) == 1 and "'my-srv__ech' from command line matches no tool" in warnings[0]


def test_explain_knows_trusted_project_servers_by_either_name(srv, isolated_home, tmp_path):
    write_config(isolated_home, srv.base_url)
    (tmp_path / ".mcp.json").write_text(json.dumps({"mcpServers": {"proj-x": {"command": PYTHON, "args": [SERVER]}}}))
    assert openheim("mcp", "trust", cwd=tmp_path).returncode == 0
    for name in ("proj-x__echo", "mcp__proj-x__echo", "proj_x__echo"):
        r = openheim("permissions", "explain", name, '{"text": "x"}', "--deny", "proj-x__echo", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert r.stdout.startswith("proj_x__echo ") and "decision: denied by rule" in r.stdout
        assert "not offered" not in r.stdout


def test_an_sse_entry_works_and_an_unusable_entry_is_skipped_with_one_line(srv, isolated_home, tmp_path):
    """Another client's file as is: an "sse" server (the SDK's SSE server transport, on 127.0.0.1) is used;
    an entry of an unknown type is left out with one line and the rest of --mcp-config loads."""
    from mcp_helpers import HttpServer

    write_config(isolated_home, srv.base_url)
    with HttpServer(name="legacy", sse=True) as server:
        file = tmp_path / "servers.json"
        file.write_text(
            json.dumps(
                {
                    "mcpServers": {
                        "legacy-sse": {"type": "sse", "url": server.url},
                        "odd": {"type": "websocket", "url": "ws://127.0.0.1:9/"},
                    }
                }
            )
        )
        srv.enqueue(Reply(tool_calls=[ToolCall("legacy_sse__echo", {"text": "over sse"})]), Reply(text="done"))
        r = openheim("--mcp-config", str(file), "run", "--approve", "all", "go", cwd=tmp_path)
        assert r.returncode == 0, r.stderr
        assert tool_contents(srv.requests[-1]) == ["echo: over sse"]
        skipped = [line for line in r.stderr.splitlines() if "'odd'" in line]
        assert len(skipped) == 1 and "unknown type 'websocket'" in skipped[0] and "left out" in skipped[0]
        status = openheim("--mcp-config", str(file), "mcp", "--json", cwd=tmp_path)
        (entry,) = json.loads(status.stdout)["servers"]
        assert entry["transport"] == "sse" and entry["state"] == "connected"
