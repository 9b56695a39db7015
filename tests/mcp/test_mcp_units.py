"""Pure parts of the MCP client: tool names, result text, the mcpServers JSON, URL rules, trust, layering."""

from __future__ import annotations

import json

import pytest
from fake_client import EchoTool, WriteTool

from openheim.acp.mcp_servers import mcp_servers as acp_servers
from openheim.acp.util import RpcError
from openheim.config.mcp_json import load_mcp_file, parse_mcp_json
from openheim.config.schema import parse_mcp_server
from openheim.core.tools import LayeredExecutor, ToolRegistry
from openheim.core.turn_context import TurnContext
from openheim.errors import ConfigError, ToolExecutionError
from openheim.mcp import trust
from openheim.mcp.content import result_text
from openheim.mcp.naming import exposed_name, fnv1a64
from openheim.mcp.project import read_project
from openheim.mcp.tool import capabilities_of, input_schema

# --- names ---------------------------------------------------------------------------------


def test_fnv1a64_known_vectors():
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8


@pytest.mark.parametrize(
    ("server", "tool", "expected"),
    [
        ("files", "read", "files__read"),
        ("my-server", "get-thing", "my_server__get-thing"),  # server names lose hyphens, tool names keep them
        ("a.b c", "x/y:z", "a_b_c__x_y_z"),
        ("9lives", "t", "_9lives__t"),
        ("ünï", "tøøl", "_n___t__l"),
    ],
)
def test_exposed_names_are_sanitised(server, tool, expected):
    assert exposed_name(server, tool) == expected


def test_long_names_are_cut_to_64_with_a_stable_hash_of_the_original():
    server, tool = "s" * 30, "t" * 40
    name = exposed_name(server, tool)
    digest = fnv1a64(f"{server}__{tool}".encode()) & 0xFFFFFFFF
    assert len(name) == 64 and name == f"{(server + '__' + tool)[:55]}_{digest:08x}"
    assert exposed_name(server, tool + "x") != name  # a different original, a different suffix
    assert len(exposed_name("s", "t" * 61)) == 64 and exposed_name("s", "t" * 59) == "s__" + "t" * 59


# --- result text ------------------------------------------------------------------------------


def test_result_blocks_become_text_with_their_uris():
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "embedded"}},
            {"type": "resource", "resource": {"uri": "file:///b", "blob": "AA=="}},
            {"type": "resource_link", "uri": "file:///c", "name": "c"},
            {"type": "something_new"},
        ]
    }
    assert result_text(result) == (
        "one\n[image: image/png, not sent: not a PNG, JPEG, GIF or WebP image]\n"
        "[audio: audio/wav]\n[resource file:///a (unknown)]\n"
        "embedded\n[blob: file:///b (unknown); binary content not shown]\n"
        "[resource link c: file:///c (unknown)]\n[something_new]"
    )


def test_structured_content_is_used_when_there_are_no_blocks():
    assert result_text({"content": [], "structuredContent": {"a": 1}}) == '{"a": 1}'
    assert result_text({}) == ""


# --- schemas and capabilities -------------------------------------------------------------------


def test_input_schema_is_passed_through_and_made_an_object_when_needed():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    assert input_schema({"inputSchema": schema}) is schema
    assert input_schema({}) == {"type": "object", "properties": {}}
    assert input_schema({"inputSchema": {"properties": {"a": {}}}})["type"] == "object"


def test_only_a_read_only_hint_makes_a_tool_read_only():
    assert capabilities_of({"annotations": {"readOnlyHint": True}}).read_only
    assert not capabilities_of({"annotations": {"readOnlyHint": False, "destructiveHint": False}}).read_only
    assert not capabilities_of({}).read_only
    assert capabilities_of({}).kind == "other"


# --- config -------------------------------------------------------------------------------------


def test_plain_http_with_headers_is_allowed_on_loopback_only():
    ok = parse_mcp_server("s", {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer x"}})
    assert ok.transport == "http"
    parse_mcp_server("s", {"url": "http://localhost:9/mcp", "headers": {"A": "b"}})
    parse_mcp_server("s", {"url": "http://mcp.example.com/mcp"})  # no credentials: allowed
    with pytest.raises(ConfigError, match="unencrypted"):
        parse_mcp_server("s", {"url": "http://mcp.example.com/mcp", "headers": {"A": "b"}})
    with pytest.raises(ConfigError, match="must start with http"):
        parse_mcp_server("s", {"url": "ftp://x/mcp"})


def test_the_mcp_servers_json_of_other_clients_is_read_as_is(monkeypatch):
    monkeypatch.setenv("DOCS_TOKEN", "t0k")
    monkeypatch.delenv("MISSING_VAR", raising=False)
    doc = {
        "mcpServers": {
            "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "${TZ_NAME:-UTC}"}},
            "docs": {
                "type": "http",
                "url": "https://docs.example.com/mcp",
                "headers": {"Authorization": "Bearer ${DOCS_TOKEN}"},
            },
            "cursor_style": {"url": "https://x.example.com/mcp"},
            "cline": {"command": "node", "args": ["s.js"], "disabled": True, "alwaysAllow": ["x"]},
            "old": {"type": "sse", "url": "https://x.example.com/sse"},
            "needs": {"command": "srv", "env": {"KEY": "${MISSING_VAR}"}},
            "weird": {"type": "websocket", "url": "wss://x"},
        }
    }
    servers, problems = parse_mcp_json(json.dumps(doc), "f.json")
    assert set(servers) == {"time", "docs", "cursor_style", "old"} and servers["old"].transport == "sse"
    assert servers["time"].env == {"TZ": "UTC"} and servers["time"].args == ["mcp-server-time"]
    assert servers["docs"].headers == {"Authorization": "Bearer t0k"} and servers["docs"].transport == "http"
    assert servers["cursor_style"].transport == "http"
    assert len(problems) == 2
    assert any("MISSING_VAR" in p for p in problems)
    assert any("unknown type 'websocket'" in p for p in problems)


@pytest.mark.parametrize(
    ("text", "match"), [("nope", "not valid JSON"), ("[]", 'no "mcpServers"'), ('{"servers": {}}', 'no "mcpServers"')]
)
def test_a_document_that_is_not_mcp_servers_json_is_an_error(text, match):
    with pytest.raises(ConfigError, match=match):
        parse_mcp_json(text, "f.json")


def test_an_mcp_config_file_leaves_out_an_unusable_entry_with_one_line(tmp_path, caplog):
    path = tmp_path / "m.json"
    path.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "a": {"command": "x"},
                    "b": {"type": "ws", "url": "https://x"},
                    "c": {"type": "sse", "url": "https://x/sse"},
                }
            }
        )
    )
    with caplog.at_level("WARNING"):
        servers = load_mcp_file(path, "mcp-config")
    assert [(s.name, s.transport) for s in servers.values()] == [("a", "stdio"), ("c", "sse")]
    (line,) = [r.message for r in caplog.records]
    assert "'b'" in line and "unknown type 'ws'" in line and "left out" in line
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="is not valid JSON"):
        load_mcp_file(path, "mcp-config")
    path.write_text(json.dumps({"mcpServers": {"a": {"command": "x"}}}))
    assert load_mcp_file(path, "mcp-config")["a"].source == "mcp-config"
    with pytest.raises(ConfigError, match="cannot read MCP config"):
        load_mcp_file(tmp_path / "absent.json", "mcp-config")


def test_mcp_startup_timeout_is_a_top_level_key(tmp_path):
    from openheim.config.load import load_config

    base = 'default_provider = "p"\n[providers.p]\napi_base = "https://x"\ndefault_model = "m"\n'
    (tmp_path / "c.toml").write_text("mcp_startup_timeout_secs = 0\n" + base)
    assert load_config(tmp_path / "c.toml").mcp_startup_timeout_secs == 0
    (tmp_path / "c.toml").write_text(base)
    assert load_config(tmp_path / "c.toml").mcp_startup_timeout_secs == 10


# --- ACP's mcpServers ---------------------------------------------------------------------------


def test_acp_server_entries_become_configs_and_bad_ones_are_left_out(caplog):
    entries = [
        {"name": "local", "command": "/bin/srv", "args": ["-v"], "env": [{"name": "K", "value": "v"}]},
        {
            "type": "http",
            "name": "remote",
            "url": "https://r.example.com/mcp",
            "headers": [{"name": "Authorization", "value": "Bearer x"}],
        },
        {"type": "sse", "name": "old", "url": "https://o.example.com/sse", "headers": []},
        {"type": "http", "name": "leaky", "url": "http://r.example.com/mcp", "headers": [{"name": "A", "value": "b"}]},
        {"name": "local", "command": "/bin/other", "args": [], "env": []},
        {"command": "x"},
        "junk",
    ]
    with caplog.at_level("WARNING"):
        servers = acp_servers({"mcpServers": entries})
    assert [(s.name, s.transport) for s in servers] == [("local", "stdio"), ("remote", "http"), ("old", "sse")]
    assert servers[0].env == {"K": "v"} and servers[0].args == ["-v"]
    assert servers[1].headers == {"Authorization": "Bearer x"}
    assert len([r for r in caplog.records if "from the client is not used" in r.message]) == 4
    assert acp_servers({}) == [] and acp_servers({"mcpServers": None}) == []
    with pytest.raises(RpcError, match="must be an array"):
        acp_servers({"mcpServers": {"a": 1}})


# --- trust --------------------------------------------------------------------------------------


def test_a_project_file_is_trusted_by_path_and_content(tmp_path):
    data = tmp_path / "data"
    project = tmp_path / "repo"
    project.mkdir()
    file = project / ".mcp.json"
    file.write_text(json.dumps({"mcpServers": {"s": {"command": "srv"}}}))
    found = read_project(project, data)
    assert found.trust == "untrusted" and list(found.servers) == ["s"]
    assert "openheim mcp trust" in found.notice()
    trust.trust(data, file)
    found = read_project(project, data)
    assert found.trusted and found.servers["s"].source == "project" and found.servers["s"].cwd == project.resolve()
    file.write_text(json.dumps({"mcpServers": {"s": {"command": "evil"}}}))
    found = read_project(project, data)
    assert found.trust == "changed" and "changed since you trusted it" in found.notice()
    assert trust.untrust(data, file) and not trust.untrust(data, file)
    assert read_project(tmp_path / "nothing-here", data) is None


# --- layering -----------------------------------------------------------------------------------


def test_layered_executor_lists_all_layers_and_the_first_layer_wins():
    first = ToolRegistry([EchoTool()])
    shadowed = WriteTool()
    shadowed.name = "echo"
    second = ToolRegistry([shadowed, WriteTool()])
    layered = LayeredExecutor(first, second)
    assert layered.names() == ["echo", "poke"]
    assert [t.name for t in layered.definitions()] == ["echo", "poke"]
    assert layered.capabilities("echo").read_only is True and layered.capabilities("poke").read_only is False
    assert layered.execute("echo", '{"text": "hi"}', TurnContext()) == "hi"
    with pytest.raises(ToolExecutionError, match="Unknown tool: nope"):
        layered.execute("nope", "{}", TurnContext())
    assert "poke" in layered and "nope" not in layered and len(layered) == 2
