"""`openheim acp` turns on the wire: busy sessions, concurrency, cancellation and shutdown."""

from __future__ import annotations

import itertools
import os
import time

from acp_wire import AcpWire, agent_text, updates
from fake_llm import Reply, ToolCall


def test_second_prompt_on_a_busy_session_is_refused_naming_it(wire, srv, project):
    srv.enqueue(Reply(text="slow reply in many words", delay=0.1))
    wire.initialize()
    sid = wire.new_session(project)
    first = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "one"}]})
    second_response, _ = wire.call("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "two"}]})
    assert second_response["error"]["code"] == -32603
    assert sid in second_response["error"]["message"]
    assert second_response["error"]["data"] == {"kind": "session_busy", "session_id": sid}
    response, _ = wire.until_response(first)
    assert response["result"]["stopReason"] == "end_turn"


def test_two_sessions_run_concurrently(wire, srv, project):
    srv.enqueue(Reply(text="alpha alpha alpha alpha", delay=0.05), Reply(text="beta beta beta beta", delay=0.05))
    wire.initialize()
    s1, s2 = wire.new_session(project), wire.new_session(project)
    r1 = wire.start("session/prompt", {"sessionId": s1, "prompt": [{"type": "text", "text": "one"}]})
    r2 = wire.start("session/prompt", {"sessionId": s2, "prompt": [{"type": "text", "text": "two"}]})
    owners, done, text = [], {}, {s1: "", s2: ""}
    ids = {r1: s1, r2: s2}
    while len(done) < 2:
        frame = wire.next_frame()
        if frame.get("method") == "session/update":
            owner = frame["params"]["sessionId"]
            assert owner not in done  # nothing after a session's answer
            update = frame["params"]["update"]
            if update["sessionUpdate"] == "agent_message_chunk":
                text[owner] += update["content"]["text"]
                owners.append(owner)
        elif frame.get("id") in ids:
            done[ids[frame["id"]]] = frame["result"]["stopReason"]
    assert done == {s1: "end_turn", s2: "end_turn"}
    switches = sum(1 for a, b in itertools.pairwise(owners) if a != b)
    assert switches >= 2, owners  # the two turns' chunks interleave
    assert sorted([text[s1], text[s2]]) == ["alpha alpha alpha alpha", "beta beta beta beta"]


def test_cancel_during_streaming_answers_cancelled_quickly_and_next_prompt_works(wire, srv, project):
    sid, request_id = _streaming_prompt(wire, srv, project, delay=0.05)
    started = time.monotonic()
    wire.notify("session/cancel", {"sessionId": sid})
    response, _ = wire.until_response(request_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert time.monotonic() - started < 1.0
    assert wire.no_frame_within(0.3)
    response, frames = wire.prompt(sid, "again")
    assert response["result"]["stopReason"] == "end_turn" and agent_text(frames) == "echo: again"


def test_cancel_during_a_long_command_kills_it_and_closes_the_tool_call(wire, srv, project):
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "echo $$ > pid; sleep 30"})]))
    wire.initialize()
    sid = wire.new_session(project)
    request_id = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    frame = wire.next_frame()
    while frame.get("method") != "session/request_permission":
        frame = wire.next_frame()
    wire.send(
        {"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}
    )
    pid = _wait_for_pid(project / "pid")
    wire.notify("session/cancel", {"sessionId": sid})
    response, frames = wire.until_response(request_id)
    assert response["result"] == {"stopReason": "cancelled"}
    assert updates(frames, "tool_call_update")[-1]["status"] == "failed"
    assert _gone(pid)


def test_cancel_during_a_pending_permission_never_runs_the_tool(wire, srv, project):
    srv.enqueue(Reply(tool_calls=[ToolCall("write_file", {"path": "c.txt", "content": "x"})]))
    wire.initialize()
    sid = wire.new_session(project)
    request_id = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    frame = wire.next_frame()
    while frame.get("method") != "session/request_permission":
        frame = wire.next_frame()
    wire.notify("session/cancel", {"sessionId": sid})
    response, frames = wire.until_response(request_id, on_request=lambda f: None)
    assert response["result"] == {"stopReason": "cancelled"}
    wire.send({"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": {"outcome": "cancelled"}}})
    assert updates(frames, "tool_call_update")[-1]["status"] == "failed"
    assert not (project / "c.txt").exists()
    assert wire.no_frame_within(0.3)


def test_eof_exits_zero_fast_and_leaves_no_child(srv, project):
    srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "echo $$ > pid; sleep 30"})]))
    wire = AcpWire()
    wire.initialize()
    sid = wire.new_session(project)
    wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
    frame = wire.next_frame()
    while frame.get("method") != "session/request_permission":
        frame = wire.next_frame()
    wire.send(
        {"jsonrpc": "2.0", "id": frame["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}}
    )
    pid = _wait_for_pid(project / "pid")
    started = time.monotonic()
    assert wire.close(timeout=3) == 0
    assert time.monotonic() - started < 2.0
    assert _gone(pid)


def test_prompt_sent_right_after_a_cancel_runs_once_the_old_turn_ends(wire, srv, project):
    sid, first = _streaming_prompt(wire, srv, project, delay=0.03)
    wire.notify("session/cancel", {"sessionId": sid})
    second = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "next"}]})
    answers, after_first = {}, []
    while len(answers) < 2:
        frame = wire.next_frame()
        if frame.get("id") in (first, second) and "method" not in frame:
            answers[frame["id"]] = frame["result"]["stopReason"]
        elif first in answers:
            after_first.append(frame)
    assert answers == {first: "cancelled", second: "end_turn"}
    assert agent_text(after_first) == "echo: next"


def test_close_during_a_turn_cancels_it_first(wire, srv, project):
    srv.enqueue(Reply(text=" ".join(["word"] * 200), delay=0.03))
    wire.initialize()
    sid = wire.new_session(project)
    request_id = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
    frame = wire.next_frame()
    while updates([frame], "agent_message_chunk") == []:
        frame = wire.next_frame()
    close_id = wire.start("session/close", {"sessionId": sid})
    answers = {}
    while len(answers) < 2:
        frame = wire.next_frame()
        if frame.get("id") in (request_id, close_id) and "method" not in frame:
            answers[frame["id"]] = frame["result"]
    assert answers == {request_id: {"stopReason": "cancelled"}, close_id: {}}
    response, _ = wire.prompt(sid, "after close")
    assert response["error"]["code"] == -32002


def test_fractional_ids_are_echoed_and_object_ids_refused(wire):
    response, _ = wire.until_response(wire.start("initialize", {"protocolVersion": 1}, request_id=1.5))
    assert response["id"] == 1.5 and response["result"]["protocolVersion"] == 1
    wire.send_raw(b'{"jsonrpc": "2.0", "id": {"bad": 1}, "method": "initialize", "params": {}}\n')
    frame = wire.next_frame()
    assert frame["id"] is None and frame["error"]["code"] == -32600


def _wait_for_pid(path, timeout: float = 5.0) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return int(path.read_text())
        time.sleep(0.02)
    raise AssertionError("the command never started")


def _gone(pid: int, timeout: float = 2.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.02)
    return False


def test_terminal_created_after_cancel_is_killed_and_released(srv, project):
    agent = AcpWire()
    try:
        agent.initialize({"terminal": True})
        sid = agent.new_session(project)
        srv.enqueue(Reply(tool_calls=[ToolCall("execute_command", {"command": "sleep 30"})]), Reply(text="ok"))
        prompt_id = agent.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]})
        create = None
        while create is None:
            frame = agent.next_frame()
            assert frame is not None
            if frame.get("method") == "session/request_permission":
                agent.send(
                    {
                        "jsonrpc": "2.0",
                        "id": frame["id"],
                        "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}},
                    }
                )
            elif frame.get("method") == "terminal/create":
                create = frame
        agent.notify("session/cancel", {"sessionId": sid})
        answer, _ = agent.until_response(prompt_id)
        assert answer["result"]["stopReason"] == "cancelled"
        agent.send({"jsonrpc": "2.0", "id": create["id"], "result": {"terminalId": "late-1"}})  # too late
        late = [agent.next_frame(5) for _ in range(2)]
        assert {(f["method"], f["params"]["terminalId"]) for f in late if f} == {
            ("terminal/kill", "late-1"),
            ("terminal/release", "late-1"),
        }
    finally:
        agent.close()


def _streaming_prompt(wire, srv, project, delay):
    """Start a long streamed reply on a new session; return (session id, prompt id) once text flows."""
    srv.enqueue(Reply(text=" ".join(["word"] * 200), delay=delay))
    wire.initialize()
    sid = wire.new_session(project)
    request_id = wire.start("session/prompt", {"sessionId": sid, "prompt": [{"type": "text", "text": "long"}]})
    frame = wire.next_frame()
    while updates([frame], "agent_message_chunk") == []:
        frame = wire.next_frame()
    return sid, request_id
