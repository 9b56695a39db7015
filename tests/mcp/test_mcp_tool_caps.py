"""One MCP server adds at most 200 tools and 256 KiB of tool definitions to every model request: a real SDK
server declaring 5,000 tools (the first with a 5 MiB inputSchema) gets its first 200 small ones offered, one
notice line names what was left out, and `openheim mcp` shows it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.mcp.tool_budget import MAX_TOOL_BYTES, MAX_TOOLS, within_budget

pytest.importorskip("mcp")

SERVER = str(Path(__file__).resolve().parents[1] / "support" / "mcp_many_tools_server.py")
TOOLS = 5000


def _config(tools: int, giant_mib: int = 0) -> str:
    args = ", ".join(f'"{a}"' for a in [SERVER, "--tools", str(tools), "--giant-mib", str(giant_mib)])
    return f'mcp_startup_timeout_secs = 60\n[mcp_servers.many]\ncommand = "{sys.executable}"\nargs = [{args}]\n'


def _offered(request) -> list[str]:
    return [t["function"]["name"] for t in request.body.get("tools", [])]


def test_a_server_with_5000_tools_and_a_5_mib_schema_contributes_its_budget(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra=_config(TOOLS, giant_mib=5))
        srv.enqueue(Reply(tool_calls=[ToolCall("many__t199", {"text": "x"})]), Reply(text="done"))
        r = openheim("run", "--approve", "all", "go", cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        offered = {n for n in _offered(srv.requests[0]) if n.startswith("many__")}
        assert offered == {f"many__t{i}" for i in range(MAX_TOOLS)}  # the first 200 small ones
        assert len(json.dumps(srv.requests[0].body)) < 2 * MAX_TOOL_BYTES  # not the 5 MiB schema
        assert srv.requests[1].body["messages"][-1]["content"] == "called t199"
        notices = [line for line in r.stderr.splitlines() if "left out" in line]
        assert len(notices) == 1, r.stderr
        assert (
            f"MCP server 'many' offers {TOOLS + 1} tools; {TOOLS + 1 - MAX_TOOLS} are left out (giant, t200, "
            in (notices[0])
        )
        assert "at most 200 tools and 256 KiB of tool definitions per server" in notices[0]

        r = openheim("mcp", "--json", "--timeout", "60", cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        (status,) = json.loads(r.stdout)["servers"]
        assert status["tool_count"] == MAX_TOOLS
        assert status["tools_left_out"] == ["giant", *(f"t{i}" for i in range(MAX_TOOLS, TOOLS))]
        r = openheim("mcp", "--timeout", "60", cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        assert "MCP server 'many' offers 5001 tools; 4801 are left out (giant, t200" in r.stdout


def test_a_server_within_the_budget_is_offered_whole_and_says_nothing(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as srv:
        write_config(isolated_home, srv.base_url, extra=_config(MAX_TOOLS))
        srv.enqueue(Reply(text="done"))
        r = openheim("run", "go", cwd=tmp_path, timeout=120)
        assert r.returncode == 0, r.stderr
        assert len([n for n in _offered(srv.requests[0]) if n.startswith("many__")]) == MAX_TOOLS
        assert "left out" not in r.stderr


def test_the_budget_keeps_order_and_lets_smaller_later_tools_in():
    small = {"name": "s", "description": "", "inputSchema": {"type": "object"}}
    big = {"name": "big", "description": "x" * MAX_TOOL_BYTES, "inputSchema": {"type": "object"}}
    budgeted = within_budget([{**small, "name": "a"}, big, {**small, "name": "b"}])
    assert [s["name"] for s in budgeted.kept] == ["a", "b"] and budgeted.left_out == ["big"]
    budgeted = within_budget([{**small, "name": f"t{i}"} for i in range(5)], max_tools=3)
    assert budgeted.left_out == ["t3", "t4"]
