"""A live session of `openheim serve` belongs to the connection that opened or loaded it: a second real
WebSocket client can neither prompt, cancel, switch, close, delete nor load it; stored sessions stay
listable and loadable; one client's share of live sessions leaves room for the others."""

from __future__ import annotations

import inspect
import time
from pathlib import Path

from acp_wire import agent_text
from fake_llm import Reply
from ws_client import TOKEN, WsAcp, running_server

from openheim.acp.handlers import Handlers
from openheim.client import OpenheimClient
from openheim.serve.ownership import ConnectionClient, OwnedSession

IN_USE = "is in use by another client"
# every ACP method that names no session (the rest must be refused on another client's live session)
UNNAMED = {"initialize", "authenticate", "session/new", "session/list"}
# OpenheimClient calls that name a session but only read what is stored (or act on a plan's session)
READ_ONLY = {"stored_session"}


def _pair(server) -> tuple[WsAcp, WsAcp]:
    first, second = WsAcp(server, "/acp", token=TOKEN), WsAcp(server, "/ws", token=TOKEN)
    first.initialize()
    second.initialize()
    return first, second


def _params(session_id: str, project: Path) -> dict:
    """Enough for any session method to reach its session."""
    return {
        "sessionId": session_id,
        "cwd": str(project),
        "mcpServers": [],
        "prompt": [{"type": "text", "text": "from the other client"}],
        "modeId": "architect",
        "configId": "mode",
        "value": "architect",
    }


def _acp_methods() -> list[str]:
    return sorted(set(Handlers(None, None).methods) - UNNAMED)  # type: ignore[arg-type]


def test_every_session_method_of_another_client_is_refused(srv, server, project):
    owner, other = _pair(server)
    try:
        sid = owner.new_session(project)
        response, _ = owner.prompt(sid, "mine")
        assert response["result"]["stopReason"] == "end_turn"
        methods = _acp_methods()
        assert {"session/prompt", "session/load", "session/close", "session/delete", "session/set_mode"} <= set(methods)
        for method in methods:
            response, _ = other.call(method, _params(sid, project))
            assert "error" in response, (method, response)
            assert IN_USE in response["error"]["message"], (method, response)
            assert response["error"]["data"] == {"kind": "session_in_use", "sessionId": sid}
        # the owner's session is untouched: same mode, still live, still answering
        response, frames = owner.prompt(sid, "still mine")
        assert response["result"]["stopReason"] == "end_turn" and agent_text(frames) == "echo: still mine"
        assert len(srv.requests) == 2  # the other client's prompt never reached the model
        assert any(s["sessionId"] == sid for s in other.result("session/list", {})["sessions"])  # still listed
    finally:
        owner.close()
        other.close()


def test_a_cancel_from_another_client_leaves_the_turn_running(srv, server, project):
    owner, other = _pair(server)
    try:
        sid = owner.new_session(project)
        srv.enqueue(Reply(text="a slow and complete answer", delay=0.15))
        request_id = owner.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        deadline = time.monotonic() + 10
        while not srv.requests:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        other.notify("session/cancel", {"sessionId": sid})
        response, frames = owner.until_response(request_id, timeout=30)
        assert response["result"]["stopReason"] == "end_turn"
        assert agent_text(frames) == "a slow and complete answer"
        # the owner's own cancel still works
        srv.enqueue(Reply(text="x " * 200, delay=0.1))
        request_id = owner.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]})
        while len(srv.requests) < 2:
            time.sleep(0.01)
        owner.notify("session/cancel", {"sessionId": sid})
        response, _ = owner.until_response(request_id, timeout=30)
        assert response["result"]["stopReason"] == "cancelled"
    finally:
        owner.close()
        other.close()


def test_stored_sessions_stay_listable_and_loadable_by_anyone(srv, server, project):
    owner, other = _pair(server)
    try:
        closed = owner.new_session(project)
        owner.prompt(closed, "closed by its owner")
        assert owner.result("session/close", {"sessionId": closed}) == {}
        left = owner.new_session(project)
        owner.prompt(left, "left behind")
        listed = {s["sessionId"] for s in other.result("session/list", {})["sessions"]}
        assert {closed, left} <= listed
        response, frames = other.call("session/load", _params(closed, project))
        assert "result" in response, response
        assert "closed by its owner" in str(frames)
        response, _ = owner.call("session/load", _params(closed, project))  # now the other client holds it
        assert IN_USE in response["error"]["message"]
    finally:
        owner.close()
    # the owner went away: what it held is free
    deadline = time.monotonic() + 10
    while True:
        response, _ = other.call("session/load", _params(left, project))
        if "result" in response or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    try:
        assert "result" in response, response
        response, frames = other.prompt(left, "mine now")
        assert agent_text(frames) == "echo: mine now"
        assert other.result("session/delete", {"sessionId": closed}) == {}
    finally:
        other.close()


def test_one_client_filling_its_share_leaves_room_for_the_others(srv, project):
    with running_server(project, token=TOKEN, max_sessions_per_client=3) as server:
        greedy, polite = _pair(server)
        try:
            opened = [greedy.new_session(project) for _ in range(3)]
            response, _ = greedy.call("session/new", {"cwd": str(project), "mcpServers": []})
            message = response["error"]["message"]
            assert "this client already has 3 live sessions open" in message and "session/close" in message
            assert response["error"]["data"]["kind"] == "too_many_sessions"
            mine = [polite.new_session(project) for _ in range(3)]
            assert len(set(mine)) == 3
            response, frames = polite.prompt(mine[0], "room for me")
            assert agent_text(frames) == "echo: room for me"
            assert greedy.result("session/close", {"sessionId": opened[0]}) == {}
            assert greedy.new_session(project)  # a closed one frees its slot
        finally:
            greedy.close()
            polite.close()


def test_every_client_call_naming_a_session_goes_through_the_ownership_check():
    """The choke point: each OpenheimClient method that takes a session id is defined by ConnectionClient itself,
    or only reads stored sessions; every live Session it hands out is an OwnedSession, whose closing, letting go
    and forking keep the connection's share right."""
    named = {
        name
        for name, member in inspect.getmembers(OpenheimClient, inspect.isfunction)
        if not name.startswith("_") and {"session_id", "plan"} & set(inspect.signature(member).parameters)
    }
    assert {"session", "resume_session", "delete_session"} <= named
    unchecked = sorted(n for n in named - READ_ONLY if n not in vars(ConnectionClient))
    assert not unchecked, f"OpenheimClient.{unchecked} reach live sessions without ConnectionClient's check"
    assert {"new_session", "resume_session", "session"} <= set(vars(ConnectionClient))
    for opener in ("new_session", "resume_session", "session"):
        assert "OwnedSession(" in inspect.getsource(getattr(ConnectionClient, opener))
    assert {"fork", "close", "let_go"} <= set(vars(OwnedSession))


def test_serve_hands_every_connection_its_own_connection_client():
    source = (Path(__file__).resolve().parents[2] / "openheim" / "serve" / "server.py").read_text()
    calls = source.split("AcpServer(")[1:]
    assert len(calls) == 2 and all(call.lstrip().startswith('cast("OpenheimClient", peer.client),') for call in calls)
    assert "peer = Peer(ws, self.options.max_pending, ConnectionClient(" in source
