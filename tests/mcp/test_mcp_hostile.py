"""Sloppy and hostile MCP servers, through `openheim run` (tests/support/mcp_hostile_server.py): an oversized result
is refused in the reader, stray stdout lines and an invalid tool cost one note each, the server's stderr log
rotates by size while it runs, and too many or too big tools get one warning naming the server."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from cli_helpers import openheim, write_config
from fake_llm import FakeLLMServer, Reply, ToolCall
from mcp_helpers import PYTHON, new_tag, offered, pids_with, wait_until

pytest.importorskip("mcp")

HOSTILE = str(Path(__file__).resolve().parents[1] / "support" / "mcp_hostile_server.py")


def hostile(name: str, tag: str, *args: str) -> str:
    quoted = ", ".join(f'"{a}"' for a in [HOSTILE, *args, "--tag", tag])
    return f'\n[mcp_servers.{name}]\ncommand = "{PYTHON}"\nargs = [{quoted}]\n'


def tool_contents(request) -> list[str]:
    return [m["content"] for m in request.body["messages"] if m["role"] == "tool"]


@pytest.fixture
def srv(isolated_home):
    with FakeLLMServer(wire="openai") as server:
        yield server


def test_a_sloppy_server_costs_one_line_per_problem_and_its_log_rotates(srv, isolated_home, tmp_path):
    tag = new_tag()
    write_config(
        isolated_home,
        srv.base_url,
        extra=hostile(
            "sloppy", tag, "--banner", "--bad-tool", "--tools", "130", "--schema-kib", "70", "--stderr-mib", "11"
        ),
    )
    srv.enqueue(Reply(tool_calls=[ToolCall("sloppy__echo", {"text": "hi"})]), Reply(text="done"))
    r = openheim("run", "--approve", "all", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "Traceback" not in r.stderr
    assert tool_contents(srv.requests[1]) == ["echo: hi"]
    names = offered(srv.requests[0])
    assert "sloppy__echo" in names and "sloppy__t129" in names and "sloppy__broken" not in names
    lines = r.stderr.splitlines()
    broken = [line for line in lines if "broken" in line]
    assert len(broken) == 1 and "'broken' is left out: its inputSchema is not a JSON object" in broken[0]
    many = [line for line in lines if "sent with every request" in line]
    assert len(many) == 1 and "132 MCP tools (over 128)" in many[0] and "sloppy (132)" in many[0]
    assert "over 64 KiB each are sent with every request, from: sloppy" in many[0]
    assert len(lines) == 3, r.stderr  # the wait notice, the left-out tool, the weight warning
    logs = isolated_home / "logs"
    current, older = logs / "mcp-sloppy.log", logs / "mcp-sloppy.log.1"
    assert wait_until(lambda: not pids_with(tag), timeout=5)
    assert "ignored a line on stdout that is not JSON: b'Starting the hostile server" in (
        older.read_text() + current.read_text()
    )
    assert older.stat().st_size <= 10_000_000 and current.stat().st_size <= 10_000_000
    assert older.stat().st_size + current.stat().st_size > (11 << 20) - 100_000


def test_an_oversized_result_is_refused_without_reading_it_all(srv, isolated_home, tmp_path):
    tag = new_tag()
    write_config(isolated_home, srv.base_url, extra="mcp_max_message_mib = 4\n" + hostile("big", tag))
    srv.enqueue(
        Reply(tool_calls=[ToolCall("big__huge", {"mib": 40})]),
        Reply(tool_calls=[ToolCall("big__echo", {"text": "after"})]),
        Reply(text="done"),
    )
    started = time.monotonic()
    r = openheim("run", "--approve", "all", "go", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert time.monotonic() - started < 20
    (refused,) = tool_contents(srv.requests[1])
    assert (
        "MCP server 'big' sent a message of 40 MiB, over the 4 MiB limit (mcp_max_message_mib); it was "
        "refused" in refused
    )
    assert tool_contents(srv.requests[2])[-1] == "echo: after"  # the connection lives on
    refusals = [line for line in r.stderr.splitlines() if "over the 4 MiB limit" in line]
    assert len(refusals) == 1 and "Traceback" not in r.stderr
