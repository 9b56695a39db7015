"""The REST API's answers: the public config (no secret anywhere), models, skills, tools, MCP, sessions."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid

import pytest
from ws_client import TOKEN, WsAcp, running_server

SECRETS = ("sk-test-SECRET-123", "mcp-env-SECRET", "mcp-header-SECRET", "mcp-arg-SECRET", "userinfo-SECRET")


def get(server, path: str) -> tuple[int, object]:
    request = urllib.request.Request(
        f"http://127.0.0.1:{server.port}{path}", headers={"Authorization": f"Bearer {TOKEN}"}
    )
    try:
        with urllib.request.urlopen(request) as r:
            return r.status, json.load(r)
    except urllib.error.HTTPError as e:
        with e:
            return e.code, json.load(e)


@pytest.fixture
def secret_config(srv, isolated_home, project):
    config = isolated_home / "config.toml"
    config.write_text(
        config.read_text()
        + (
            '[mcp_servers.tools]\ncommand = "mcp-tool"\nargs = ["--key", "mcp-arg-SECRET"]\n'
            'env = { TOOL_KEY = "mcp-env-SECRET" }\n'
            '[mcp_servers.remote]\nurl = "https://user:userinfo-SECRET@mcp.example/mcp?k=x"\n'
            'headers = { Authorization = "mcp-header-SECRET" }\n'
        )
    )
    (isolated_home / "skills").mkdir()
    (isolated_home / "skills" / "review.md").write_text("Review the code.\n")
    (isolated_home / "skills" / "explain.md").write_text("Explain it.\n")
    with running_server(project, token=TOKEN) as server:
        yield server


def test_no_endpoint_shows_a_secret(secret_config, project):
    server = secret_config
    client = WsAcp(server, "/acp", token=TOKEN)
    try:
        client.initialize()
        sid = client.new_session(project)
        client.prompt(sid, "hello")
    finally:
        client.close()
    for path in (
        "/api/config",
        "/api/models",
        "/api/skills",
        "/api/tools",
        "/api/mcp-servers",
        "/api/sessions",
        f"/api/sessions/{sid}",
        "/api/openapi.json",
    ):
        status, body = get(server, path)
        assert status == 200, (path, body)
        text = json.dumps(body)
        assert not [s for s in SECRETS if s in text], (path, text[:500])


def test_config_models_skills_tools_and_mcp(secret_config, project):
    server = secret_config
    _, config = get(server, "/api/config")
    assert config["work_dir"] == str(project) and "data_dir" not in config
    assert config["providers"]["fake"]["default_model"] == "fake-model" and "api_key" not in config["providers"]["fake"]
    assert config["mcp_servers"]["tools"]["env"] == {"TOOL_KEY": "<redacted>"}
    assert config["mcp_servers"]["remote"]["url"] == "https://mcp.example/mcp"
    assert get(server, "/api/models")[1] == {
        "default_provider": "fake",
        "providers": {"fake": {"default_model": "fake-model", "models": ["fake-model", "other-model"]}},
    }
    assert get(server, "/api/skills")[1] == ["explain", "review"]
    tools = {t["name"]: t for t in get(server, "/api/tools")[1]}
    assert tools["read_file"]["read_only"] is True and tools["write_file"]["read_only"] is False
    assert tools["read_file"]["parameters"]["type"] == "object"
    servers = {s["name"]: s for s in get(server, "/api/mcp-servers")[1]}
    assert sorted(servers) == ["remote", "tools"]
    assert servers["remote"]["transport"] == "http" and servers["remote"]["url"] == "https://mcp.example/mcp"
    assert servers["tools"]["transport"] == "stdio" and servers["tools"]["source"] == "config"
    assert all(s["state"] in ("starting", "failed") and not s["connected"] for s in servers.values())


def test_sessions_newest_first_and_one_in_full(server, srv, project):
    assert get(server, "/api/sessions") == (200, [])
    client = WsAcp(server, "/acp", token=TOKEN)
    try:
        client.initialize()
        first, second = client.new_session(project), client.new_session(project)
        client.prompt(first, "the first")
        client.prompt(second, "the second")
    finally:
        client.close()
    status, metas = get(server, "/api/sessions")
    assert [m["id"] for m in metas] == [second, first] and metas[0]["title"] == "the second"
    status, full = get(server, f"/api/sessions/{first}")
    assert status == 200 and full["meta"]["id"] == first
    assert [m["role"] for m in full["messages"]] == ["user", "assistant"]
    assert full["messages"][1]["content"] == [{"type": "text", "text": "echo: the first"}]
    assert get(server, f"/api/sessions/{uuid.uuid4()}") == (404, {"error": "session not found"})
    for bad in ("not-a-uuid", "..%2F..%2Fconfig", "%00", ""):
        assert get(server, f"/api/sessions/{bad}") == (400, {"error": "invalid session id"}), bad
    assert get(server, "/api/sessions/a/b")[0] == 404
    assert get(server, "/api/unknown") == (404, {"error": "no such endpoint: /api/unknown; see /api/openapi.json"})


def test_an_unreadable_history_is_a_422_in_one_line(server, isolated_home, project):
    history = isolated_home / "history"
    history.mkdir(exist_ok=True)
    sid = str(uuid.uuid4())
    (history / f"{sid}.json").write_text("{not json")
    assert get(server, f"/api/sessions/{sid}") == (
        422,
        {"error": "the session's stored files are damaged and cannot be read; see the server log"},
    )
