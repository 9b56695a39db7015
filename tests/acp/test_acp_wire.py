"""`openheim acp` on the wire: hand-made JSON-RPC lines in, every stdout line checked against the ACP schema."""

from __future__ import annotations

import json

import pytest
from acp_wire import AcpWire, agent_text, updates
from cli_helpers import write_config
from fake_llm import FakeLLMServer, Reply, ToolCall


def test_initialize_answers_version_1_with_truthful_capabilities(wire):
    result = wire.result("initialize", {"protocolVersion": 7, "clientCapabilities": {}})
    assert result["protocolVersion"] == 1
    caps = result["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"] == {"image": True, "audio": False, "embeddedContext": True}
    assert set(caps["sessionCapabilities"]) == {"list", "resume", "close", "delete"}
    assert result["authMethods"] == [] and result["agentInfo"]["name"] == "openheim"


def test_string_ids_are_echoed_and_unknown_methods_get_32601(wire):
    response, _ = wire.until_response(wire.start("initialize", {"protocolVersion": 1}, request_id="abc"))
    assert response["id"] == "abc" and response["result"]["protocolVersion"] == 1
    response, _ = wire.call("session/fly", {})
    assert response["error"]["code"] == -32601 and "session/fly" in response["error"]["message"]
    response, _ = wire.call("_openheim/unknown", {})
    assert response["error"]["code"] == -32601


def test_malformed_lines_are_answered_and_the_loop_keeps_going(wire):
    wire.send_raw(b"{not json\n")
    frame = wire.next_frame()
    assert frame["id"] is None and frame["error"]["code"] == -32700
    wire.send_raw(b'[{"jsonrpc":"2.0","id":1,"method":"initialize"}]\n')
    frame = wire.next_frame()
    assert frame["id"] is None and frame["error"]["code"] == -32600
    wire.send_raw(b"\xff\xfe garbage\n")
    assert wire.next_frame()["error"]["code"] == -32700
    wire.send_raw(b"\n   \n")  # blank lines are skipped silently
    assert wire.initialize()["protocolVersion"] == 1


def test_notifications_and_stray_responses_get_no_answer(wire):
    wire.notify("_zed/hello", {"x": 1})
    wire.notify("$/cancel_request", {"requestId": 5})
    wire.notify("session/cancel", {"sessionId": "not-a-uuid"})
    wire.send({"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "Parse error"}})
    wire.send({"jsonrpc": "2.0", "id": 999, "result": {}})
    wire.send({"jsonrpc": "2.0", "id": "zzz", "result": None})
    assert wire.no_frame_within(0.3)
    assert wire.initialize()["protocolVersion"] == 1
    assert wire.proc.poll() is None


@pytest.mark.parametrize(
    "params, needle",
    [
        ({"mcpServers": []}, "'cwd' is required"),
        ({"cwd": "relative/dir", "mcpServers": []}, "absolute"),
        ({"cwd": "/tmp", "mcpServers": "nope"}, "mcpServers"),
        ({"cwd": "/tmp", "mcpServers": [], "_meta": {"skills": "x"}}, "skills"),
        ({"cwd": "/tmp", "mcpServers": [], "_meta": {"model": "no-such-model"}}, "no-such-model"),
    ],
)
def test_bad_session_new_params_get_32602_with_a_reason(wire, params, needle):
    wire.initialize()
    response, _ = wire.call("session/new", params)
    assert response["error"]["code"] == -32602, response
    assert needle in response["error"]["message"]


def test_params_that_are_not_an_object_get_32602(wire):
    response, _ = wire.call("session/new", [1, 2])
    assert response["error"]["code"] == -32602


def test_unknown_and_malformed_session_ids(wire, project):
    wire.initialize()
    response, _ = wire.call(
        "session/prompt",
        {"sessionId": "5d0d1e9a-0000-4000-8000-000000000000", "prompt": [{"type": "text", "text": "hi"}]},
    )
    assert response["error"]["code"] == -32002
    response, _ = wire.call("session/prompt", {"sessionId": "../etc", "prompt": [{"type": "text", "text": "x"}]})
    assert response["error"]["code"] == -32602
    response, _ = wire.call("session/prompt", {"sessionId": wire.new_session(project), "prompt": []})
    assert response["error"]["code"] == -32602


def test_session_new_answer_precedes_its_updates_and_commands_list_skills(wire, project, isolated_home):
    skills = isolated_home / "skills"
    skills.mkdir()
    (skills / "review.md").write_text("---\ndescription: Review the code\n---\nBe a strict reviewer.\n")
    wire.initialize()
    request_id = wire.start("session/new", {"cwd": str(project), "mcpServers": []})
    response, before = wire.until_response(request_id)
    assert before == []
    sid = response["result"]["sessionId"]
    update = wire.next_frame()["params"]
    assert update["sessionId"] == sid
    commands = update["update"]["availableCommands"]
    assert update["update"]["sessionUpdate"] == "available_commands_update"
    assert [c["name"] for c in commands] == ["compact", "undo", "review"]  # the built-in ones, then the skills
    assert commands[-1] == {"name": "review", "description": "Review the code", "input": {"hint": "what to do"}}


def test_slash_command_runs_the_turn_with_that_skill(wire, srv, project, isolated_home):
    (isolated_home / "skills").mkdir()
    (isolated_home / "skills" / "review.md").write_text("Be a strict reviewer, SKILL-MARKER.\n")
    wire.initialize()
    sid = wire.new_session(project)
    response, _ = wire.prompt(sid, "/review the parser")
    assert response["result"]["stopReason"] == "end_turn"
    body = json.dumps(srv.requests[-1].body)
    assert "SKILL-MARKER" in body
    assert srv.requests[-1].body["messages"][-1]["content"] == "the parser"
    wire.prompt(sid, "plain turn")
    assert "SKILL-MARKER" not in json.dumps(srv.requests[-1].body)


def test_prompt_streams_updates_before_the_answer_and_nothing_after(wire, srv, project):
    (project / "notes.txt").write_text("the answer is 42\n")
    srv.enqueue(
        Reply(text="Looking", thinking="let me think", tool_calls=[ToolCall("read_file", {"path": "notes.txt"})]),
        Reply(text="It says 42."),
    )
    wire.initialize()
    sid = wire.new_session(project)
    response, frames = wire.prompt(sid, "what do my notes say?")
    assert response["result"]["stopReason"] == "end_turn" and "usage" in response["result"]["_meta"]["openheim"]
    assert agent_text(frames) == "LookingIt says 42."
    thoughts = updates(frames, "agent_thought_chunk")
    assert "".join(u["content"]["text"] for u in thoughts) == "let me think"
    call = updates(frames, "tool_call")[0]
    assert call["title"] == "Read notes.txt" and call["kind"] == "read" and call["status"] == "pending"
    assert call["locations"] == [{"path": str(project / "notes.txt")}]
    assert call["rawInput"] == {"path": "notes.txt"}
    statuses = [u["status"] for u in updates(frames, "tool_call_update")]
    assert statuses == ["in_progress", "completed"]
    done = updates(frames, "tool_call_update")[-1]
    assert "the answer is 42" in done["content"][0]["content"]["text"]
    assert updates(frames, "session_info_update")[0]["title"] == "what do my notes say?"
    assert frames[-1]["params"]["update"]["sessionUpdate"] == "session_info_update"
    assert wire.no_frame_within(0.2)
    _, frames = wire.prompt(sid, "second")
    assert updates(frames, "session_info_update") == []


def test_write_file_permission_shows_a_diff_and_reject_never_writes(wire, srv, project):
    target = project / "a.txt"
    target.write_text("old line\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("write_file", {"path": "a.txt", "content": "new line\n"})]), Reply(text="ok")
    )
    wire.initialize()
    sid = wire.new_session(project)
    asked = []

    def reject(frame):
        asked.append(frame)
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    response, frames = wire.prompt(sid, "rewrite", on_request=reject)
    assert response["result"]["stopReason"] == "end_turn"
    assert target.read_text() == "old line\n"
    params = asked[0]["params"]
    assert [o["optionId"] for o in params["options"]] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert params["toolCall"]["title"] == "Write a.txt" and params["toolCall"]["kind"] == "edit"
    assert params["toolCall"]["content"] == [
        {"type": "diff", "path": str(target), "oldText": "old line\n", "newText": "new line\n"}
    ]
    assert updates(frames, "tool_call_update")[-1]["status"] == "failed"
    assert "Permission denied" in json.dumps(srv.requests[1].body["messages"][-1])


@pytest.mark.parametrize(
    "answer",
    [
        {"outcome": {"outcome": "cancelled"}},
        {"outcome": {"outcome": "selected", "optionId": "bogus"}},
        "error",
    ],
)
def test_permission_cancelled_unknown_or_error_never_runs_the_tool(wire, srv, project, answer):
    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "b.txt", "content": "x"})]), Reply(text="ok"))
    wire.initialize()
    sid = wire.new_session(project)

    def respond(frame):
        if answer == "error":
            wire.send({"jsonrpc": "2.0", "id": frame["id"], "error": {"code": -32800, "message": "cancelled"}})
            return None
        return answer

    response, _ = wire.prompt(sid, "go", on_request=respond)
    assert response["result"]["stopReason"] == "end_turn"
    assert not (project / "b.txt").exists()


def test_execute_command_title_names_the_command_and_runs_after_allow(wire, srv, project):
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "echo hi > made.txt"})]), Reply(text="ok"))
    wire.initialize()
    sid = wire.new_session(project)
    asked = []
    response, frames = wire.prompt(
        sid,
        "go",
        on_request=lambda f: asked.append(f) or {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
    )
    assert response["result"]["stopReason"] == "end_turn"
    assert (project / "made.txt").read_text() == "hi\n"
    assert asked[0]["params"]["toolCall"]["title"] == "Run `echo hi > made.txt`"
    assert updates(frames, "tool_call")[0]["kind"] == "execute"


def test_prompt_content_blocks_become_context(wire, srv, project):
    wire.initialize()
    sid = wire.new_session(project)
    prompt = [
        {"type": "text", "text": "look"},
        {"type": "resource_link", "uri": f"file://{project}/x.py", "name": "x.py"},
        {
            "type": "resource",
            "resource": {"uri": f"file://{project}/y.py", "text": "EMBEDDED-TEXT", "mimeType": "text/x-python"},
        },
        {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
    ]
    response, _ = wire.call("session/prompt", {"sessionId": sid, "prompt": prompt})
    assert response["result"]["stopReason"] == "end_turn"
    sent = json.dumps(srv.requests[-1].body["messages"][-1])
    assert "EMBEDDED-TEXT" in sent and f"{project}/x.py" in sent and "image" in sent
    response, _ = wire.call(
        "session/prompt", {"sessionId": sid, "prompt": [{"type": "audio", "data": "AAAA", "mimeType": "audio/wav"}]}
    )
    assert response["error"]["code"] == -32602 and "audio" in response["error"]["message"]


def test_a_10_mb_line_is_handled(wire):
    wire.initialize()
    big = "x" * (10 * 1024 * 1024)
    response, _ = wire.call("_openheim/big", {"blob": big}, timeout=20)
    assert response["error"]["code"] == -32601
    assert wire.initialize()["protocolVersion"] == 1


def test_cwd_outside_the_configured_work_dir_is_refused_naming_both(isolated_home, tmp_path):
    with FakeLLMServer(wire="openai") as server:
        allowed = (tmp_path / "allowed").resolve()
        allowed.mkdir()
        write_config(isolated_home, server.base_url, extra=f'work_dir = "{allowed}"')
        wire = AcpWire()
        try:
            wire.initialize()
            response, _ = wire.call("session/new", {"cwd": str(tmp_path), "mcpServers": []})
            assert response["error"]["code"] == -32602
            assert str(tmp_path) in response["error"]["message"] and str(allowed) in response["error"]["message"]
            assert wire.new_session(allowed / ".")
        finally:
            wire.close()


def test_sessions_are_scoped_to_their_own_cwd(wire, srv, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        d.mkdir()
        (d / "f.txt").write_text(f"in {d.name}\n")
    srv.enqueue(
        Reply(tool_calls=[ToolCall("read_file", {"path": "f.txt"})]),
        Reply(text="ok"),
        Reply(tool_calls=[ToolCall("read_file", {"path": "../a/f.txt"})]),
        Reply(text="ok"),
    )
    wire.initialize()
    wire.prompt(wire.new_session(b), "read")
    assert "in b" in json.dumps(srv.requests[1].body["messages"][-1])
    wire.prompt(wire.new_session(b), "escape")
    assert "outside the work directory" in json.dumps(srv.requests[3].body["messages"][-1])


def test_modes_and_config_options(wire, project):
    wire.initialize()
    result = wire.result("session/new", {"cwd": str(project), "mcpServers": []})
    sid = result["sessionId"]
    assert result["modes"]["currentModeId"] == "code"
    options = {o["id"]: o for o in result["configOptions"]}
    assert options["model"]["category"] == "model" and options["model"]["currentValue"] == "fake/fake-model"
    assert options["mode"]["category"] == "mode"
    response, frames = wire.call("session/set_mode", {"sessionId": sid, "modeId": "architect"})
    assert response["result"] == {}
    assert updates(frames, "current_mode_update") == [
        {"sessionUpdate": "current_mode_update", "currentModeId": "architect"}
    ]
    pushed = updates(frames, "config_option_update")[0]["configOptions"]
    assert {o["id"]: o["currentValue"] for o in pushed}["mode"] == "architect"
    result = wire.result(
        "session/set_config_option", {"sessionId": sid, "configId": "model", "value": "fake/other-model"}
    )
    current = {o["id"]: o["currentValue"] for o in result["configOptions"]}
    assert current == {"model": "fake/other-model", "mode": "architect"}
    result = wire.result("session/set_config_option", {"sessionId": sid, "configId": "mode", "value": "code"})
    assert {o["id"]: o["currentValue"] for o in result["configOptions"]}["mode"] == "code"
    for bad in (
        {"configId": "nope", "value": "x"},
        {"configId": "model", "value": "ghost-model"},
        {"configId": "mode", "value": "yolo"},
    ):
        response, _ = wire.call("session/set_config_option", {"sessionId": sid, **bad})
        assert response["error"]["code"] == -32602, (bad, response)


def test_list_load_resume_close_delete(wire, srv, project):
    srv.enqueue(Reply(tool_calls=[ToolCall("list_dir", {})]), Reply(text="listed"))
    wire.initialize()
    sid = wire.new_session(project)
    wire.prompt(sid, "list it")
    sessions = wire.result("session/list", {"cwd": str(project)})["sessions"]
    assert [s["sessionId"] for s in sessions] == [sid] and sessions[0]["title"] == "list it"
    assert wire.result("session/list", {"cwd": "/nowhere"}) == {"sessions": []}
    assert wire.call("session/list", {"cursor": "bogus"})[0]["error"]["code"] == -32602
    assert wire.result("session/close", {"sessionId": sid}) == {}
    response, frames = wire.call("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
    assert set(response["result"]) == {"modes", "configOptions"}
    kinds = [u["sessionUpdate"] for u in updates(frames)]
    assert kinds == ["user_message_chunk", "tool_call", "tool_call_update", "agent_message_chunk"]
    response, frames = wire.call("session/resume", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
    assert "modes" in response["result"]
    assert [u for u in updates(frames) if u["sessionUpdate"] != "available_commands_update"] == []  # no replay
    assert wire.result("session/delete", {"sessionId": sid}) == {}
    assert wire.result("session/delete", {"sessionId": sid}) == {}
    assert wire.result("session/list", {}) == {"sessions": []}


def test_stdio_alias_and_config_errors(srv, isolated_home):
    wire = AcpWire(command="stdio")
    try:
        assert wire.initialize()["protocolVersion"] == 1
    finally:
        assert wire.close() == 0
    (isolated_home / "config.toml").write_text("default_provider = [broken\n")
    _assert_setup_error(AcpWire(), "/", "TOML parse error in")


def _assert_setup_error(wire: AcpWire, cwd, needle: str) -> None:
    """`initialize` is answered; everything needing the runtime fails with one message saying what to do."""
    try:
        assert wire.initialize()["protocolVersion"] == 1
        assert wire.result("authenticate", {"methodId": "none"}) == {}
        for method, params in [
            ("session/new", {"cwd": str(cwd), "mcpServers": []}),
            ("session/list", {}),
            ("session/load", {"sessionId": "8b3f0c8e-1111-4222-8333-444455556666", "cwd": str(cwd), "mcpServers": []}),
            (
                "session/prompt",
                {"sessionId": "8b3f0c8e-1111-4222-8333-444455556666", "prompt": [{"type": "text", "text": "hi"}]},
            ),
        ]:
            response, _ = wire.call(method, params)
            error = response["error"]
            assert error["code"] == -32603 and needle in error["message"], (method, error)
            assert error["data"] == {"kind": "not_configured"}
        wire.notify("session/cancel", {"sessionId": "8b3f0c8e-1111-4222-8333-444455556666"})
        assert wire.proc.poll() is None
    finally:
        assert wire.close() == 0
    assert wire.next_frame(timeout=2) is None  # stdout carried protocol frames only (each was parsed)
    lines = [line for line in wire.stderr.decode().splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0], lines  # said once on stderr, too


def test_no_config_file_answers_initialize_then_says_run_init(isolated_home, project):
    assert not (isolated_home / "config.toml").exists()
    _assert_setup_error(
        AcpWire(),
        project,
        f"Config file not found at {isolated_home / 'config.toml'}. Run `openheim init` to create one.",
    )


def test_no_api_key_answers_initialize_then_names_the_variable(isolated_home, project):
    (isolated_home / "config.toml").write_text(
        'default_provider = "openai"\n[providers.openai]\napi_base = "https://api.openai.com/v1"\n'
        'default_model = "gpt-4o"\nmodels = ["gpt-4o"]\nenv_var = "OPENAI_API_KEY"\n'
    )
    _assert_setup_error(AcpWire(), project, "set the OPENAI_API_KEY environment variable")


def test_session_new_meta_picks_model_and_skills(wire, srv, project, isolated_home):
    (isolated_home / "skills").mkdir()
    (isolated_home / "skills" / "tidy.md").write_text("Keep it tidy, TIDY-MARKER.\n")
    wire.initialize()
    result = wire.result(
        "session/new", {"cwd": str(project), "mcpServers": [], "_meta": {"model": "other-model", "skills": ["tidy"]}}
    )
    current = {o["id"]: o["currentValue"] for o in result["configOptions"]}
    assert current["model"] == "fake/other-model"
    wire.prompt(result["sessionId"], "hello")
    body = srv.requests[-1].body
    assert body["model"] == "other-model" and "TIDY-MARKER" in json.dumps(body)


def test_usage_update_only_when_the_context_window_is_known(isolated_home, project):
    with FakeLLMServer(wire="openai") as server:
        write_config(isolated_home, server.base_url, provider_extra="context_window = 8000")
        server.enqueue(Reply(text="hi", usage=(120, 5, 900)))
        wire = AcpWire()
        try:
            wire.initialize()
            assert wire.result("authenticate", {"methodId": "none"}) == {}
            response, frames = wire.prompt(wire.new_session(project), "count")
            assert response["result"]["stopReason"] == "end_turn"
            usage = {
                "totalTokens": 1025,
                "inputTokens": 120,
                "outputTokens": 5,
                "cachedReadTokens": 900,
                "cachedWriteTokens": 0,
            }  # cache reads and writes apart, in _meta
            assert updates(frames, "usage_update") == [
                {"sessionUpdate": "usage_update", "used": 1025, "size": 8000, "_meta": {"openheim": {"usage": usage}}}
            ]
        finally:
            wire.close()


def test_bare_model_names_and_bad_load_requests(wire, project):
    wire.initialize()
    sid = wire.new_session(project)
    result = wire.result("session/set_config_option", {"sessionId": sid, "configId": "model", "value": "other-model"})
    assert {o["id"]: o["currentValue"] for o in result["configOptions"]}["model"] == "fake/other-model"
    missing = "5d0d1e9a-0000-4000-8000-000000000000"
    response, _ = wire.call("session/load", {"sessionId": missing, "cwd": str(project), "mcpServers": []})
    assert response["error"]["code"] == -32002
    response, _ = wire.call("session/load", {"sessionId": sid, "cwd": "rel", "mcpServers": []})
    assert response["error"]["code"] == -32602


def test_load_warns_first_when_the_stored_provider_is_gone(srv, project, isolated_home):
    first = AcpWire()
    try:
        first.initialize()
        sid = first.new_session(project)
        first.prompt(sid, "remember me")
    finally:
        first.close()
    write_config(isolated_home, srv.base_url, name="renamed")
    second = AcpWire()
    try:
        second.initialize()
        response, frames = second.call("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
        assert "result" in response
        replayed = updates(frames)
        assert replayed[0]["sessionUpdate"] == "agent_message_chunk"
        assert "Could not restore this session's provider 'fake'" in replayed[0]["content"]["text"]
        assert [u["sessionUpdate"] for u in replayed[1:]] == ["user_message_chunk", "agent_message_chunk"]
        current = {o["id"]: o["currentValue"] for o in response["result"]["configOptions"]}
        assert current["model"] == "renamed/fake-model"
    finally:
        second.close()


def test_a_deeply_nested_line_is_a_parse_error_and_the_loop_keeps_going(wire, project):
    wire.send_raw(b"[" * 100000 + b"]" * 100000 + b"\n")
    frame = wire.next_frame()
    assert frame["id"] is None and frame["error"]["code"] == -32700
    assert "nested too deeply" in frame["error"]["message"]
    wire.send_raw(b'{"jsonrpc":"2.0","id":7,"method":"initialize","params":' + b"[" * 5000 + b"]" * 5000 + b"}\n")
    assert wire.next_frame()["error"]["code"] == -32700
    assert wire.initialize()["protocolVersion"] == 1
    assert wire.new_session(project)
    assert wire.proc.poll() is None


@pytest.mark.parametrize("raw_id", [b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity"])
def test_a_non_finite_id_is_an_invalid_request_answered_with_valid_json(wire, raw_id):
    wire.send_raw(b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"initialize","params":{"protocolVersion":1}}\n')
    line = wire.frames.get(timeout=10)
    frame = json.loads(line, parse_constant=lambda name: pytest.fail(f"not JSON: {name} in {line!r}"))
    assert frame["id"] is None and frame["error"]["code"] == -32600
    assert "'id'" in frame["error"]["message"]
    wire.send_raw(b'{"jsonrpc":"2.0","id":' + raw_id + b',"error":{"code":1,"message":"x"}}\n')  # a stray answer
    assert wire.no_frame_within(0.2)
    assert wire.initialize()["protocolVersion"] == 1
