"""`openheim acp` connects the MCP servers an editor passes in session/new (stdio and http), scoped to the
session: their tools are offered next to the built-ins, and they stop when the session closes or stdin ends."""

from __future__ import annotations

import asyncio

import pytest
from acp_wire import AcpWire, client_env, updates
from fake_llm import Reply, ToolCall
from mcp_helpers import PYTHON, SERVER, HttpServer, new_tag, pids_with, wait_until

pytest.importorskip("mcp")


def stdio_entry(name: str, tag: str, env: dict | None = None) -> dict:
    return {
        "name": name,
        "command": PYTHON,
        "args": [SERVER, "--tag", tag],
        "env": [{"name": k, "value": v} for k, v in (env or {}).items()],
    }


def offered(request) -> set[str]:
    return {t["function"]["name"] for t in request.body.get("tools", [])}


def test_initialize_advertises_http_and_sse_mcp(wire):
    caps = wire.initialize()["agentCapabilities"]["mcpCapabilities"]
    assert caps == {"http": True, "sse": True}


def test_a_client_supplied_stdio_server_is_used_and_stops_with_the_session(wire, srv, project):
    tag = new_tag()
    srv.enqueue(Reply(tool_calls=[ToolCall("editor__env", {"name": "EDITOR_SECRET"})]), Reply(text="done"))
    wire.initialize()
    sid = wire.result(
        "session/new", {"cwd": str(project), "mcpServers": [stdio_entry("editor", tag, {"EDITOR_SECRET": "s3"})]}
    )["sessionId"]
    other = wire.new_session(project)
    response, frames = wire.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert "editor__env" in offered(srv.requests[0]) and "read_file" in offered(srv.requests[0])
    assert srv.requests[1].body["messages"][-1]["content"] == "s3"
    call = next(u for u in updates(frames, "tool_call"))
    assert call["title"] == "editor: env" and call["kind"] == "other"
    done = [u for u in updates(frames, "tool_call_update") if u.get("status") == "completed"]
    assert done and done[0]["content"][-1]["content"]["text"] == "s3"

    wire.prompt(other, "hi")
    assert not any(name.startswith("editor__") for name in offered(srv.requests[-1]))  # scoped to its session
    assert pids_with(tag)
    wire.result("session/close", {"sessionId": sid})
    assert wait_until(lambda: not pids_with(tag), timeout=10), "the session's MCP server outlived session/close"


def test_stdin_eof_ends_every_client_server(srv, project):
    tag = new_tag()
    wire = AcpWire()
    try:
        wire.initialize()
        wire.result("session/new", {"cwd": str(project), "mcpServers": [stdio_entry("a", tag)]})
        assert wait_until(lambda: pids_with(tag), timeout=30)
    finally:
        code = wire.close(timeout=15)
    assert code == 0
    assert wait_until(lambda: not pids_with(tag), timeout=5)


def test_sigterm_ends_every_client_server(srv, project):
    import signal

    tag = new_tag()
    wire = AcpWire()
    try:
        wire.initialize()
        wire.result("session/new", {"cwd": str(project), "mcpServers": [stdio_entry("a", tag)]})
        assert wait_until(lambda: pids_with(tag), timeout=30)
        wire.proc.send_signal(signal.SIGTERM)
        code = wire.proc.wait(15)
    finally:
        wire.close()
    assert code == 128 + signal.SIGTERM
    assert wait_until(lambda: not pids_with(tag), timeout=5)


def test_a_client_supplied_http_server_and_a_bad_entry(wire, srv, project):
    with HttpServer() as http:
        srv.enqueue(Reply(tool_calls=[ToolCall("remote__header", {"name": "authorization"})]), Reply(text="ok"))
        wire.initialize()
        sid = wire.result(
            "session/new",
            {
                "cwd": str(project),
                "mcpServers": [
                    {
                        "type": "http",
                        "name": "remote",
                        "url": http.url,
                        "headers": [{"name": "Authorization", "value": "Bearer from-the-editor"}],
                    },
                    {"type": "websocket", "name": "old", "url": http.url, "headers": []},
                ],
            },
        )["sessionId"]
        response, _ = wire.prompt(sid, "go")
    assert response["result"]["stopReason"] == "end_turn"
    assert srv.requests[1].body["messages"][-1]["content"] == "Bearer from-the-editor"
    assert not any(n.startswith("old__") for n in offered(srv.requests[0]))
    assert b"MCP server #2 from the client is not used" in wire.stderr


def test_the_python_acp_client_passes_its_servers(srv, project):
    """The real ACP client library's McpServerStdio shape reaches the tools."""
    acp = pytest.importorskip("acp")
    from acp import spawn_agent_process, text_block
    from acp.schema import EnvVariable, McpServerStdio
    from test_acp_client import FakeEditor

    tag = new_tag()
    srv.enqueue(Reply(tool_calls=[ToolCall("lib__echo", {"text": "via the sdk"})]), Reply(text="done"))

    async def main() -> str:
        editor = FakeEditor()
        import sys

        async with spawn_agent_process(
            editor, sys.executable, "-m", "openheim", "acp", env=client_env(), cwd=str(project)
        ) as (conn, _proc):
            await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
            server = McpServerStdio(
                name="lib", command=PYTHON, args=[SERVER, "--tag", tag], env=[EnvVariable(name="X", value="1")]
            )
            session = await conn.new_session(cwd=str(project), mcp_servers=[server])
            result = await conn.prompt(session_id=session.session_id, prompt=[text_block("go")])
            return result.stop_reason

    assert asyncio.run(main()) == "end_turn"
    assert srv.requests[1].body["messages"][-1]["content"] == "echo: via the sdk"
    assert wait_until(lambda: not pids_with(tag), timeout=10)


def test_the_wait_for_a_new_server_is_told_as_a_thought_the_client_library_accepts(srv, project, tmp_path):
    """Through the real ACP client library (its schema validation and ours on every frame): a never-seen server
    of the session is waited for with a notice, sent as a thought chunk before the answer."""
    from acp import text_block
    from acp.schema import McpServerStdio
    from test_acp_client import FakeEditor, run

    tag = new_tag()
    srv.enqueue(Reply(text="the answer"))
    editor = FakeEditor()

    async def scenario(conn):
        slow = McpServerStdio(name="slow", command=PYTHON, args=[SERVER, "--delay", "1", "--tag", tag], env=[])
        sid = (await conn.new_session(cwd=str(project), mcp_servers=[slow])).session_id
        assert (await conn.prompt(session_id=sid, prompt=[text_block("hi")])).stop_reason == "end_turn"

    run(scenario, editor, tmp_path)
    kinds = [u.session_update for u in editor.updates if u.session_update.endswith("_chunk")]
    thoughts = [u for u in editor.updates if u.session_update == "agent_thought_chunk"]
    assert [u.content.text for u in thoughts] == ["[starting MCP servers: slow]\n"]
    assert thoughts[0].field_meta == {"openheim/notice": {"level": "info"}}
    assert kinds.index("agent_thought_chunk") < kinds.index("agent_message_chunk")
    assert editor.text() == "the answer"
    assert "slow__echo" in offered(srv.requests[0])
    assert wait_until(lambda: not pids_with(tag), timeout=10)
