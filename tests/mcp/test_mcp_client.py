"""MCP through the library with real servers (tests/support/mcp_server.py over stdio and HTTP, and mcp-server-time):
calls, results, errors, deadlines, reconnects, start-up waits, scoping, status and clean shutdown."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest
from fake_client import ScriptedLlm, text_reply, tool_reply
from mcp_helpers import (
    PYTHON,
    SERVER,
    HttpServer,
    alive,
    new_tag,
    pids_with,
    stdio_server,
    wait_until,
)

from openheim.client import OpenheimClient
from openheim.errors import ConfigError

pytest.importorskip("mcp")


class ToolsLlm(ScriptedLlm):
    """Also records the tools each request offered."""

    def __init__(self, replies: list) -> None:
        super().__init__(replies)
        self.sent_tools: list[list] = []

    def stream(self, messages, tools, on_chunk, cancel):
        self.sent_tools.append(list(tools))
        return super().stream(messages, tools, on_chunk, cancel)


def build(tmp_path: Path, llm: ScriptedLlm, servers: dict | None = None, **opts) -> OpenheimClient:
    builder = (
        OpenheimClient.builder()
        .api_base("http://127.0.0.1:9/v1")
        .api_key("k")
        .data_dir(tmp_path / "data")
        .llm_factory(lambda cfg: llm)
    )
    for name, cfg in (servers or {}).items():
        builder.mcp_server(name, cfg)
    for key, value in opts.items():
        getattr(builder, key)(value)
    return builder.build()


def tool_results(llm: ScriptedLlm, request: int = -1) -> list:
    """(content, is_error) of the tool results the model was sent in ``request``."""
    out = []
    for message in llm.sent[request]:
        for block in message.content:
            if getattr(block, "tool_call_id", None):
                out.append((block.content, block.is_error))
    return out


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """One client with the stdio test server, shared by the tests that only call tools."""
    tmp = tmp_path_factory.mktemp("mcp")
    llm = ToolsLlm([])
    tag = new_tag()
    client = build(tmp, llm, {"fake": stdio_server(tag, env={"FROM_CONFIG": "yes"}, tool_timeout_secs=2)})
    client.mcp_servers(wait=60)
    yield client, llm, tmp, tag
    client.close()


def run_calls(shared, *calls) -> list:
    client, llm, tmp, _ = shared
    llm.replies = [tool_reply(*calls), text_reply("done")]
    session = client.new_session(tmp)
    session.prompt("go")
    return tool_results(llm)


def test_tool_results_are_flattened_like_the_reference(shared):
    results = run_calls(
        shared,
        ("fake__echo", {"text": "hi"}),
        ("fake__picture", {}),
        ("fake__resources", {}),
        ("fake__fail", {"message": "disk on fire"}),
        ("fake__pid", ""),
    )
    assert results[0] == ("echo: hi", False)
    assert results[1] == ("a red dot\n[image: image/png, attached]", False)
    assert results[2] == (
        "[resource file:///notes.txt (text/plain)]\nthe notes say hi\n"
        "[blob: file:///data.bin (application/octet-stream); binary content not shown]\n"
        "[resource link readme: file:///README.md (unknown)]",
        False,
    )
    assert results[3][1] is True and "disk on fire" in results[3][0]  # isError -> a tool error
    assert results[4][0].isdigit() and not results[4][1]  # "" arguments mean no arguments


def test_tools_carry_the_servers_description_and_schema(shared):
    client = shared[0]
    tools = {t.name: t for t in client.tools()}
    assert {"read_file", "fake__echo", "fake__sleep"} <= set(tools)
    assert tools["fake__echo"].description == "Echo the text back."
    assert tools["fake__echo"].parameters["properties"]["text"]["type"] == "string"
    assert tools["fake__echo"].parameters["required"] == ["text"]


def test_read_only_hint_decides_the_capability_and_architect_mode(shared):
    client, llm, tmp, _ = shared
    assert client.tool_capabilities("fake__peek").read_only is True
    assert client.tool_capabilities("fake__echo").read_only is False
    session = client.new_session(tmp)
    session.set_mode("architect")
    llm.replies = [text_reply("ok")]
    session.prompt("look")
    names = {t.name for t in llm.sent_tools[-1]}
    assert "fake__peek" in names and "read_file" in names
    assert "fake__echo" not in names and "write_file" not in names
    view = session.present("fake__peek", {"path": "x"})
    assert view.title == "fake: peek" and view.kind == "other" and view.read_only is True


def test_the_server_gets_config_env_on_a_minimal_inherited_set(shared, monkeypatch):
    results = run_calls(
        shared,
        ("fake__env", {"name": "FROM_CONFIG"}),
        ("fake__env", {"name": "PATH"}),
        ("fake__env", {"name": "OPENHEIM_HOME"}),
    )
    assert results[0][0] == "yes"
    assert results[1][0] != "<unset>"
    assert results[2][0] == "<unset>"  # not inherited: only HOME, LOGNAME, PATH, SHELL, TERM, USER are


def test_server_stderr_goes_to_its_log_file(shared):
    _client, _, tmp, _ = shared
    run_calls(shared, ("fake__note_stderr", {"text": "a line for the log 7731"}))
    log = tmp / "data" / "logs" / "mcp-fake.log"
    assert wait_until(lambda: "a line for the log 7731" in log.read_text())


def test_a_call_past_its_deadline_is_a_tool_error_and_the_server_lives_on(shared):
    start = time.monotonic()
    results = run_calls(shared, ("fake__sleep", {"seconds": 30}))
    assert time.monotonic() - start < 15
    assert results[0][1] is True
    assert "MCP tool 'sleep' on 'fake' did not finish within 2s" in results[0][0]
    assert run_calls(shared, ("fake__echo", {"text": "still here"}))[0] == ("echo: still here", False)


def test_a_crashed_server_is_restarted_on_the_next_call(shared):
    before = run_calls(shared, ("fake__pid", {}))[0][0]
    crashed = run_calls(shared, ("fake__crash", {}))[0]
    assert crashed[1] is True and "MCP tool 'crash' on 'fake' failed" in crashed[0]
    assert not alive(int(before))
    client = shared[0]
    assert client.mcp_servers()[0].state == "disconnected"
    after = run_calls(shared, ("fake__pid", {}))[0]
    assert after[1] is False and after[0] != before and alive(int(after[0]))
    assert client.mcp_servers()[0].connected


def test_a_cancelled_turn_cancels_the_call(shared):
    client, llm, tmp, _ = shared
    llm.replies = [tool_reply(("fake__sleep", {"seconds": 1.5})), text_reply("done")]
    session = client.new_session(tmp)
    turn = session.start_turn("go")
    time.sleep(0.5)
    turn.cancel()
    turn.wait(5)
    assert turn.result.stop_reason.value == "cancelled"


def test_http_transport_with_headers_on_loopback(tmp_path):
    llm = ScriptedLlm(
        [tool_reply(("web__echo", {"text": "over http"}), ("web__header", {"name": "x-team"})), text_reply("done")]
    )
    with HttpServer() as http:
        client = build(tmp_path, llm, {"web": {"url": http.url, "headers": {"X-Team": "blue"}}})
        with client:
            client.new_session(tmp_path).prompt("go")
            status = client.mcp_servers()[0]
    assert tool_results(llm) == [("echo: over http", False), ("blue", False)]
    assert status.transport == "http" and status.url == http.url and status.tool_count >= 10


def test_plain_http_with_headers_is_refused_unless_loopback(tmp_path):
    with pytest.raises(ConfigError, match="unencrypted"):
        build(tmp_path, ScriptedLlm([]), {"r": {"url": "http://mcp.example.com/mcp", "headers": {"A": "b"}}})


def test_a_failing_server_is_reported_and_the_others_still_work(tmp_path):
    llm = ScriptedLlm([tool_reply(("ok__echo", {"text": "x"})), text_reply("done")])
    client = build(
        tmp_path,
        llm,
        {
            "ok": stdio_server(),
            "gone": {"command": str(tmp_path / "no-such-server")},
            "dies": {"command": PYTHON, "args": ["-c", "import sys; sys.exit(4)"]},
        },
    )
    with client:
        client.new_session(tmp_path).prompt("go")
        statuses = {s.name: s for s in client.mcp_servers()}
    assert tool_results(llm) == [("echo: x", False)]
    assert statuses["ok"].connected and statuses["ok"].tool_count >= 10
    assert not statuses["gone"].connected and statuses["gone"].error.startswith("MCP spawn 'gone' failed:")
    assert statuses["dies"].error.startswith("MCP stdio connect to 'dies' failed: Connection closed")
    assert "mcp-dies.log" in statuses["dies"].error


def test_a_turn_waits_for_a_slow_server_only_so_long(tmp_path):
    """mcp_startup_timeout_secs bounds the wait; the slow server's tools arrive in a later turn."""
    (tmp_path / "config.toml").write_text(
        'default_provider = "p"\nmcp_startup_timeout_secs = 1\n'
        '[providers.p]\napi_base = "http://127.0.0.1:9/v1"\ndefault_model = "m"\nmodels = ["m"]\napi_key = "k"\n'
        f'[mcp_servers.slow]\ncommand = "sh"\nargs = ["-c", "sleep 4; exec {PYTHON} {SERVER}"]\n'
    )
    llm = ScriptedLlm([text_reply("first"), text_reply("second")])
    client = (
        OpenheimClient.builder()
        .config_path(tmp_path / "config.toml")
        .data_dir(tmp_path / "d")
        .llm_factory(lambda cfg: llm)
        .build()
    )
    with client:
        session = client.new_session(tmp_path)
        start = time.monotonic()
        session.prompt("one")
        waited = time.monotonic() - start
        assert waited < 3.5, waited
        assert client.mcp_servers()[0].state == "starting"
        assert not any(t.name.startswith("slow__") for t in session.tools())
        assert client.mcp_servers(wait=60)[0].connected
        session.prompt("two")
        assert any(t.name == "slow__echo" for t in session.tools())


def test_session_servers_are_scoped_to_their_session_and_stop_with_it(tmp_path):
    tag = new_tag()
    llm = ScriptedLlm(
        [
            tool_reply(("mine__echo", {"text": "a"})),
            text_reply("done"),
            tool_reply(("mine__echo", {"text": "b"})),
            text_reply("done"),
        ]
    )
    client = build(tmp_path, llm)
    with client:
        own = client.new_session(tmp_path, mcp_servers=[{"name": "mine", **stdio_server(tag)}])
        other = client.new_session(tmp_path)
        own.prompt("go")
        assert tool_results(llm) == [("echo: a", False)]
        assert own.mcp_servers()[0].source == "session"
        assert not any(t.name.startswith("mine__") for t in other.tools()) and other.mcp_servers() == []
        other.prompt("go")
        assert tool_results(llm)[0][1] is True  # the other session has no such tool
        assert pids_with(tag)
        own.close()
        assert wait_until(lambda: not pids_with(tag))


def test_close_leaves_no_process_behind_not_even_a_grandchild(tmp_path):
    tag = new_tag()
    llm = ScriptedLlm([tool_reply(("fake__spawn_child", {})), text_reply("done")])
    client = build(tmp_path, llm, {"fake": stdio_server(tag)})
    client.new_session(tmp_path).prompt("go")
    grandchild = int(tool_results(llm)[0][0])
    assert alive(grandchild) and pids_with(tag)
    started = time.monotonic()
    client.close()
    assert time.monotonic() - started < 5
    assert wait_until(lambda: not pids_with(tag) and not alive(grandchild))
    client.close()  # idempotent


def test_config_names_win_over_an_mcp_config_file(tmp_path):
    file = tmp_path / "servers.json"
    file.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "fake": {"command": "no-such-command"},
                    "extra": {"type": "stdio", "command": PYTHON, "args": [SERVER, "--name", "extra"]},
                }
            }
        )
    )
    llm = ScriptedLlm([])
    with build(tmp_path, llm, {"fake": stdio_server()}, mcp_config=file) as client:
        statuses = {s.name: s for s in client.mcp_servers(wait=60)}
    assert set(statuses) == {"fake", "extra"}
    assert statuses["fake"].source == "config" and statuses["fake"].connected
    assert statuses["extra"].source == "mcp-config" and statuses["extra"].connected


@pytest.mark.skipif(
    shutil.which("mcp-server-time", path=str(Path(PYTHON).parent)) is None,
    reason="mcp-server-time (a test dependency) is not installed",
)
def test_a_third_party_server_from_pypi(tmp_path):
    command = shutil.which("mcp-server-time", path=str(Path(PYTHON).parent))
    llm = ScriptedLlm([tool_reply(("time__get_current_time", {"timezone": "Europe/Oslo"})), text_reply("done")])
    with build(tmp_path, llm, {"time": {"command": command, "args": ["--local-timezone", "UTC"]}}) as client:
        client.new_session(tmp_path).prompt("what time is it in Oslo?")
        tools = {t.name for t in client.tools()}
    assert {"time__get_current_time", "time__convert_time"} <= tools
    content, is_error = tool_results(llm)[0]
    assert not is_error, content
    assert json.loads(content)["timezone"] == "Europe/Oslo"


def test_a_failed_reconnect_is_reported_and_not_retried_for_30_s(tmp_path):
    flag, starts = tmp_path / "may-start", tmp_path / "starts"
    flag.touch()
    script = f"echo start >> {starts}; test -f {flag} && exec {PYTHON} {SERVER}"
    llm = ScriptedLlm([])
    with build(tmp_path, llm, {"flaky": {"command": "sh", "args": ["-c", script]}}) as client:
        session = client.new_session(tmp_path)
        client.mcp_servers(wait=60)
        llm.replies = [tool_reply(("flaky__crash", {})), text_reply("d")]
        session.prompt("crash it")
        flag.unlink()
        llm.replies = [
            tool_reply(("flaky__echo", {"text": "a"})),
            text_reply("d"),
            tool_reply(("flaky__echo", {"text": "b"})),
            text_reply("d"),
        ]
        session.prompt("one")
        first = tool_results(llm)[-1]
        session.prompt("two")
        second = tool_results(llm)[-1]
        status = client.mcp_servers()[0]
    expected = "MCP server 'flaky' closed its connection and reconnecting failed"
    assert first[1] and expected in first[0]
    assert second[1] and expected in second[0]
    assert starts.read_text().count("start") == 2  # the second call did not try again
    assert status.state == "disconnected" and expected in status.error


def test_an_http_server_that_restarts_is_reconnected(tmp_path):
    llm = ScriptedLlm([])
    http = HttpServer()
    try:
        with build(tmp_path, llm, {"web": {"url": http.url}}) as client:
            session = client.new_session(tmp_path)
            client.mcp_servers(wait=60)
            http.stop()
            http = HttpServer(port=http.port)
            llm.replies = [
                tool_reply(("web__echo", {"text": "first"})),
                text_reply("d"),
                tool_reply(("web__echo", {"text": "second"})),
                text_reply("d"),
            ]
            session.prompt("one")
            first = tool_results(llm)[-1]
            session.prompt("two")
            second = tool_results(llm)[-1]
    finally:
        http.stop()
    # the restarted server refuses the old session before running anything, so the call is sent again at once
    # (when the old connection's loss was seen first, that call fails instead and the next one reconnects)
    assert first == ("echo: first", False) or (first[1] and "MCP tool 'echo' on 'web' failed" in first[0])
    assert second == ("echo: second", False)
