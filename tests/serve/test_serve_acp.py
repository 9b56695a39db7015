"""ACP over `openheim serve`'s WebSockets: `/acp` (bare frames) and the `agent` channel of `/ws`."""

from __future__ import annotations

import json
import time

from acp_wire import AcpWire, agent_text, updates
from fake_llm import Reply, ToolCall
from ws_client import TOKEN, WsAcp


def test_prompt_round_trip_over_acp(acp, srv, project):
    init = acp.initialize()
    assert init["agentInfo"]["name"] == "openheim" and init["agentCapabilities"]["loadSession"] is True
    sid = acp.new_session(project)
    response, frames = acp.prompt(sid, "hello over a socket")
    assert response["result"]["stopReason"] == "end_turn"
    assert agent_text(frames) == "echo: hello over a socket"
    assert srv.requests[-1].body["messages"][-1]["content"] == "hello over a socket"


def test_prompt_round_trip_over_the_ws_agent_channel(ws, srv, project):
    assert ws.fs.get(timeout=5) == {"type": "connected", "message": "Connected to Openheim"}
    ws.initialize()
    sid = ws.new_session(project)
    response, frames = ws.prompt(sid, "hello through an envelope")
    assert response["result"]["stopReason"] == "end_turn"
    assert agent_text(frames) == "echo: hello through an envelope"
    assert ws.system.empty()


def _shape(frames: list[dict]) -> list:
    """What a frame sequence says, without ids that differ between runs (nor the timer-driven commands list)."""
    out = []
    for f in frames:
        if f.get("method") == "session/update":
            u = f["params"]["update"]
            if u["sessionUpdate"] == "available_commands_update":
                continue
            out.append(("update", u["sessionUpdate"], u.get("status"), u.get("title"), u.get("kind")))
        elif "method" in f:
            out.append(("request", f["method"], f["params"]["toolCall"].get("title")))
        else:
            out.append(("response", json.dumps(f.get("result"), sort_keys=True)))
    return out


def test_acp_over_a_socket_is_the_same_protocol_as_stdio(server, srv, project):
    """One script, stdio and /acp: the same frames (only the framing differs)."""

    def script(client, sid):
        srv.enqueue(
            Reply(tool_calls=[ToolCall("write_file", {"path": "note.txt", "content": "hi"})]), Reply(text="wrote it")
        )
        response, frames = client.prompt(sid, "write a note")
        return _shape([*frames, response])

    stdio = AcpWire()
    try:
        stdio.initialize()
        over_stdio = script(stdio, stdio.new_session(project))
    finally:
        stdio.close()
    (project / "note.txt").unlink()
    sock = WsAcp(server, "/acp", token=TOKEN)
    try:
        sock.initialize()
        over_socket = script(sock, sock.new_session(project))
    finally:
        sock.close()
    assert over_socket == over_stdio
    assert ("request", "session/request_permission", "Write note.txt") in over_socket
    assert (project / "note.txt").read_text() == "hi"


def test_permission_rejected_over_acp_never_runs_the_tool(acp, srv, project):
    acp.initialize()
    sid = acp.new_session(project)
    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "no.txt", "content": "x"})]), Reply(text="ok"))
    asked = []

    def reject(frame):
        asked.append(frame["params"]["options"])
        return {"outcome": {"outcome": "selected", "optionId": "reject_once"}}

    response, frames = acp.prompt(sid, "try it", on_request=reject)
    assert response["result"]["stopReason"] == "end_turn"
    assert [o["optionId"] for o in asked[0]] == ["allow_once", "allow_always", "reject_once", "reject_always"]
    assert not (project / "no.txt").exists()
    assert [u["status"] for u in updates(frames, "tool_call_update")][-1] == "failed"


def test_load_over_a_new_socket_replays_the_conversation(server, acp, srv, project):
    acp.initialize()
    sid = acp.new_session(project)
    acp.prompt(sid, "remember me")
    acp.close()
    again = WsAcp(server, "/acp", token=TOKEN)
    try:
        again.initialize()
        response, frames = again.call("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
        assert "result" in response
        assert [u["content"]["text"] for u in updates(frames, "user_message_chunk")] == ["remember me"]
        assert agent_text(frames) == "echo: remember me"
    finally:
        again.close()


def test_cancel_over_acp_answers_cancelled_quickly(acp, srv, project):
    acp.initialize()
    sid = acp.new_session(project)
    srv.enqueue(Reply(text=" ".join(["slow"] * 200), delay=0.05))
    request_id = acp.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not updates([acp.next_frame()], "agent_message_chunk"):
        pass
    started = time.monotonic()
    acp.notify("session/cancel", {"sessionId": sid})
    response, _ = acp.until_response(request_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert time.monotonic() - started < 1.5


def test_closing_the_socket_cancels_its_turn(server, acp, srv, project):
    acp.initialize()
    sid = acp.new_session(project)
    srv.enqueue(Reply(text=" ".join(["slow"] * 400), delay=0.05))
    acp.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    while not updates([acp.next_frame()], "agent_message_chunk"):
        pass
    acp.close()
    other = WsAcp(server, "/acp", token=TOKEN)
    try:
        other.initialize()
        deadline = time.monotonic() + 5
        while True:  # the session is free again once the abandoned turn has stopped
            response, _ = other.call("session/load", {"sessionId": sid, "cwd": str(project), "mcpServers": []})
            if "result" in response or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert "result" in response, response
        response, frames = other.prompt(sid, "after")
        assert agent_text(frames) == "echo: after"
    finally:
        other.close()


def test_malformed_frames_get_errors_and_the_socket_lives_on(server, project):
    bare = WsAcp(server, "/acp", token=TOKEN, validate=False)
    try:
        bare.ws.send("{not json")
        frame = bare.next_frame()
        assert frame["id"] is None and frame["error"]["code"] == -32700
        assert bare.initialize()["protocolVersion"] == 1
    finally:
        bare.close()
    env = WsAcp(server, "/ws", token=TOKEN, validate=False)
    try:
        env.ws.send("[1, 2")
        assert env.system.get(timeout=5)["message"].startswith("Invalid message: not JSON")
        env.ws.send(json.dumps({"channel": "telepathy", "data": {}}))
        assert env.system.get(timeout=5) == {
            "type": "error",
            "message": "Unknown channel 'telepathy'; use 'agent' or 'fs'",
        }
        env.ws.send(json.dumps({"data": {}}))
        assert "expected" in env.system.get(timeout=5)["message"]
        env.send("not a request")
        assert env.next_frame()["error"]["code"] == -32600
        assert env.initialize()["protocolVersion"] == 1
    finally:
        env.close()
