"""Who `openheim serve` trusts, driven as an outsider would: a real `openheim serve` subprocess and WebSocket
clients. A client cannot run host commands through MCP, a token is always needed (and never leaks to a tool or a
log line), the data dir is out of reach whatever the root, and one client cannot push another's sessions out."""

from __future__ import annotations

import json
import os
import signal
import stat
import time
import urllib.error
import urllib.request

import pytest
from cli_helpers import openheim, write_config
from fake_llm import Reply, ToolCall
from websockets.exceptions import InvalidStatus
from ws_client import WsAcp, serve_process


def _config(home, srv, extra: str = "") -> None:
    write_config(home, srv.base_url, extra=extra)


def status(url: str, headers: dict | None = None) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {})) as r:
            return r.status
    except urllib.error.HTTPError as e:
        e.close()
        return e.code


# --- 1. a client's stdio MCP servers ---------------------------------------------------------------


def test_a_client_cannot_run_host_commands_through_mcp_servers(srv, project, tmp_path):
    marker = tmp_path / "ran"
    evil = {"name": "evil", "command": "/bin/sh", "args": ["-c", f"id > {marker}"], "env": []}
    with serve_process(project) as served:
        client = WsAcp(served, "/acp", token=served.token)
        client.initialize()
        for method, params in (
            ("session/new", {"cwd": str(project), "mcpServers": [evil]}),
            ("session/load", {"sessionId": "0" * 8, "cwd": str(project), "mcpServers": [evil]}),
            ("session/new", {"cwd": str(project), "mcpServers": [{**evil, "type": "stdio"}]}),
        ):
            response, _ = client.call(method, params)
            assert response["error"]["code"] == -32602, response
            assert "allow_client_mcp_commands" in response["error"]["message"]
        http = {"type": "http", "name": "remote", "url": "http://127.0.0.1:9/mcp", "headers": []}
        assert client.new_session(project, mcpServers=[http])  # http entries stay allowed
        client.close()
        time.sleep(0.3)
        served.stop(signal.SIGKILL)  # (a graceful stop would wait for the unreachable http server)
    assert not marker.exists()


def test_the_server_owner_may_allow_client_mcp_commands(srv, project, isolated_home, tmp_path):
    _config(isolated_home, srv, "[serve]\nallow_client_mcp_commands = true\n")
    marker = tmp_path / "ran"
    allowed = {"name": "local", "command": "/bin/sh", "args": ["-c", f"id > {marker}"], "env": []}
    with serve_process(project) as served:
        client = WsAcp(served, "/acp", token=served.token)
        client.initialize()
        assert client.new_session(project, mcpServers=[allowed])
        deadline = time.monotonic() + 10
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        client.close()
        served.stop(signal.SIGKILL)
    assert marker.exists()


# --- 2. the token -------------------------------------------------------------------------------------


def test_without_a_configured_token_one_is_generated_printed_and_kept_0600(srv, project, isolated_home):
    with serve_process(project) as served:
        token = served.token
        assert token and len(token) >= 40
        assert f"{served.base}/?token={token} " in served.first_line
        kept = isolated_home / "serve-token"
        assert kept.read_text().strip() == token
        assert stat.S_IMODE(kept.stat().st_mode) == 0o600
        assert status(f"{served.base}/api/models") == 401
        assert status(f"{served.base}/api/models", {"Authorization": f"Bearer {token}"}) == 200
        assert status(f"{served.base}/api/models?token={token}") == 200
        for path in ("/acp", "/ws"):
            with pytest.raises(InvalidStatus) as refused:
                WsAcp(served, path)
            assert refused.value.response.status_code == 401
    with serve_process(project) as again:  # a new start, a new token
        assert again.token != token and kept.read_text().strip() == again.token


def test_no_token_is_loopback_only_and_warns(srv, project):
    with serve_process(project, "--no-token") as served:
        assert served.token is None and "no token" in served.first_line
        assert "warning: --no-token" in served.proc.stderr.readline()
        assert status(f"{served.base}/api/models") == 200
    r = openheim("serve", "--no-token", "--host", "0.0.0.0", "--port", "0", cwd=project)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "needs a token" in r.stderr


def test_the_token_never_reaches_a_tool_nor_a_log_line(srv, project, isolated_home):
    _config(isolated_home, srv, "allow_shell = true\n")
    token = "configured-serve-token-4f1c2b9d8e7a"
    srv.enqueue(
        Reply(tool_calls=[ToolCall("execute_command", {"command": "env; echo ARGS=$OPENHEIM_SERVE_TOKEN"})]),
        Reply(text="done"),
    )
    with serve_process(project, env={"OPENHEIM_SERVE_TOKEN": token, "OPENHEIM_LOG": "debug"}) as served:
        assert served.token is None  # a configured token is never printed
        client = WsAcp(served, "/acp", token=token)  # Authorization: Bearer
        client.initialize()
        sid = client.new_session(project)
        response, _ = client.prompt(sid, "show me your environment")
        assert response["result"]["stopReason"] == "end_turn"
        client.close()
        query = WsAcp(served, "/ws", token=token, query_token=True)  # ?token= in the upgrade's path
        query.close()
        assert status(f"{served.base}/api/nothing?token={token}") == 404
        code, err = served.stop()
    tool_result = json.dumps(srv.requests[-1].body)
    assert "ARGS=" in tool_result and "PATH=" in tool_result  # the command ran and its output went back
    assert token not in tool_result and "OPENHEIM_SERVE_TOKEN=" not in tool_result
    assert code == 0 and "openheim: INFO openheim.serve" in err  # verbose logging was on (hidden at the default level)
    assert token not in served.first_line + err


# --- 4. the data dir ------------------------------------------------------------------------------------


def test_the_data_dir_is_out_of_reach_when_the_root_contains_it(srv, isolated_home):
    home = isolated_home.parent  # serve rooted at $HOME, which holds .openheim
    config = isolated_home / "config.toml"
    before = config.read_text()
    os.symlink(config, home / "cfg-link")
    srv.enqueue(
        Reply(
            tool_calls=[
                ToolCall("read_file", {"path": ".openheim/config.toml"}),
                ToolCall("search", {"pattern": "sk-test-SECRET"}),
                ToolCall("read_file", {"path": "cfg-link"}),
            ]
        ),
        Reply(text="done"),
    )
    with serve_process(home) as served:
        fs = WsAcp(served, "/ws", token=served.token)
        assert fs.fs.get(timeout=5)["type"] == "connected"
        for request in (
            {"action": "read", "path": ".openheim/config.toml"},
            {"action": "read", "path": str(config)},
            {"action": "read", "path": "cfg-link"},
            {"action": "list", "path": ".openheim"},
            {"action": "watch", "path": ".openheim"},
            {"action": "write", "path": ".openheim/config.toml", "content": "default_provider = 'x'"},
            {"action": "write", "path": ".openheim/history/evil.jsonl", "content": "{}"},
            {"action": "mkdir", "path": ".openheim/agents"},
            {"action": "delete", "path": ".openheim"},
            {"action": "delete", "path": ".openheim/config.toml"},
            {"action": "rename", "from": ".openheim", "to": "stolen"},
            {"action": "rename", "from": "cfg-link", "to": ".openheim/moved"},
        ):
            reply = fs.fs_call(**request)
            assert reply["type"] == "error" and "data directory" in reply["message"], (request, reply)
        listing = fs.fs_call(action="list", path=".", recursive=True)["entries"]
        assert any(e["name"] == ".openheim" for e in listing)  # its name is shown, nothing under it
        assert not [e for e in listing if e["path"].startswith(str(isolated_home) + "/")]
        fs.close()

        agent = WsAcp(served, "/acp", token=served.token)
        agent.initialize()
        response, _ = agent.prompt(agent.new_session(home), "read the config")
        assert response["result"]["stopReason"] == "end_turn"
        agent.close()
    results = [m for m in srv.requests[-1].body["messages"] if m["role"] == "tool"]
    assert len(results) == 3 and all("data directory" in m["content"] for m in (results[0], results[2]))
    assert not any("api_key" in m["content"] or "sk-test-SECRET-123" in m["content"] for m in results), results
    assert config.read_text() == before and not (isolated_home / "history" / "evil.jsonl").exists()


# --- 5. sessions of other clients -------------------------------------------------------------------------


def test_a_client_cannot_push_out_another_clients_sessions(srv, project):
    with serve_process(project) as served:
        owner = WsAcp(served, "/acp", token=served.token)
        owner.initialize()
        mine = owner.new_session(project)
        flood = WsAcp(served, "/acp", token=served.token, validate=False)
        flood.initialize()
        ids = [flood.start("session/new", {"cwd": str(project), "mcpServers": []}) for _ in range(2100)]
        answers = {}
        while len(answers) < len(ids):
            frame = flood.next_frame(30)
            if frame is not None and frame.get("id") in ids:
                answers[frame["id"]] = frame
        made = [a for a in answers.values() if "result" in a]
        refused = [a["error"] for a in answers.values() if "error" in a]
        assert len(made) == 64 and len(refused) == 2036  # one client's share of the 2048 live sessions
        assert refused[0]["code"] == -32603 and refused[0]["data"]["kind"] == "too_many_sessions"
        assert "this client already has 64 live sessions open" in refused[0]["message"]

        srv.enqueue(Reply(text="still here"))
        response, _ = owner.prompt(mine, "are you there?")
        assert response["result"]["stopReason"] == "end_turn"

        flood.close()  # its sessions are let go: a newcomer gets room again
        newcomer = WsAcp(served, "/acp", token=served.token)
        newcomer.initialize()
        deadline = time.monotonic() + 10
        while True:
            response, _ = newcomer.call("session/new", {"cwd": str(project), "mcpServers": []})
            if "result" in response or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert "result" in response, response
        srv.enqueue(Reply(text="and now"))
        assert owner.prompt(mine, "still?")[0]["result"]["stopReason"] == "end_turn"
        owner.close()
        newcomer.close()
