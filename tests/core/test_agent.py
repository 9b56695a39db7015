"""The agent loop driven by a scripted in-process model: stop reasons, tools, repair, caps, cancel."""

from __future__ import annotations

import threading

from fake_client import (
    EchoTool,
    ScriptedLlm,
    WriteTool,
    overflow,
    text_reply,
    tool_reply,
)

from openheim.config.agent_config import AgentConfig
from openheim.core.agent import NO_RESULT, repair_missing_results, run_turn
from openheim.core.models import FinishReason, Message, StopReason, ToolUseBlock, Usage
from openheim.core.permission import Decision, PermissionGate
from openheim.core.tool_calls import RESULT_CAP, cap_result
from openheim.core.tools import ToolRegistry
from openheim.core.turn_context import TurnContext
from openheim.errors import ContextOverflow

CFG = AgentConfig("fake", "openai_compatible", "http://127.0.0.1:1", "", "fake-model", max_iterations=4)


TOOLS = (EchoTool(), WriteTool())


def run(llm, history=None, cfg=CFG, ctx=None, tools=TOOLS):
    events = []
    history = history if history is not None else [Message.user("hi")]
    result = run_turn(llm, ToolRegistry(list(tools)), cfg, history, ctx or TurnContext(), events.append)
    return result, history, events


def kinds(events):
    return [e.kind for e in events]


def test_plain_reply_ends_turn_and_streams_text():
    result, history, events = run(ScriptedLlm([text_reply("hello", usage=Usage(3, 2))]))
    assert result.stop_reason == StopReason.END_TURN and result.final_response == "hello"
    assert kinds(events) == ["iteration_start", "llm_response", "message_appended", "usage", "finished"]
    assert history[-1].text() == "hello" and result.usage.total == 5


def test_tool_call_round_trip_feeds_result_back():
    llm = ScriptedLlm([tool_reply(("echo", {"text": "pong"})), text_reply("done")])
    result, history, events = run(llm)
    assert result.stop_reason == StopReason.END_TURN and result.iterations_used == 2
    assert [m.role for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[2].tool_result_block().content == "pong"
    assert kinds(events).count("tool_call") == 1 and kinds(events).count("tool_result") == 1
    assert llm.sent[1][-1].tool_result_block().content == "pong"


def test_tool_error_is_fed_back_not_raised():
    llm = ScriptedLlm([tool_reply(("echo", {"fail": True})), text_reply("ok")])
    _, history, _ = run(llm)
    block = history[2].tool_result_block()
    assert block.is_error and block.content == "Error: Tool execution error: asked to fail"


def test_unknown_tool_and_bad_arguments_answered_without_running():
    llm = ScriptedLlm(
        [
            tool_reply(("nope", {}), ("echo", "[1, 2]"), ("echo", "{bad"), finish=FinishReason.MAX_TOKENS),
            text_reply("ok"),
        ]
    )
    _, history, _ = run(llm)
    results = [m.tool_result_block() for m in history if m.role == "tool"]
    assert results[0].content == "Error: Tool execution error: Unknown tool: nope"
    assert all(r.is_error for r in results)
    assert "not a valid JSON object" in results[1].content and "max_tokens" in results[1].content
    assert "not a valid JSON object" in results[2].content


def test_blank_arguments_are_usable():
    _, history, _ = run(ScriptedLlm([tool_reply(("echo", "")), text_reply("ok")]))
    assert not history[2].tool_result_block().is_error


def test_result_cap_cuts_at_utf8_boundary():
    text = "é" * (RESULT_CAP)  # 2 bytes each: twice the cap
    capped = cap_result(text)
    assert capped.startswith("é" * (RESULT_CAP // 2))
    assert capped.endswith(f"[tool output truncated: showing the first {RESULT_CAP} of {2 * RESULT_CAP} bytes]")
    _, history, _ = run(ScriptedLlm([tool_reply(("echo", {"text": "x" * (RESULT_CAP + 10)})), text_reply("ok")]))
    assert "[tool output truncated" in history[2].tool_result_block().content


def test_finish_reasons_map_to_stop_reasons():
    cases = [
        (text_reply("cut", FinishReason.MAX_TOKENS), StopReason.MAX_TOKENS),
        (text_reply("", FinishReason.MAX_TOKENS), StopReason.MAX_TOKENS),
        (text_reply("no", FinishReason.REFUSAL), StopReason.REFUSAL),
        (text_reply("", FinishReason.STOP), StopReason.NO_CONTENT),
        (text_reply("fine", FinishReason.OTHER), StopReason.END_TURN),
        (text_reply("fine", None), StopReason.END_TURN),
    ]
    for reply, expected in cases:
        assert run(ScriptedLlm([reply]))[0].stop_reason == expected


def test_paused_turn_calls_the_model_again():
    llm = ScriptedLlm([text_reply("part", FinishReason.PAUSED), text_reply("whole")])
    result, _, _ = run(llm)
    assert result.final_response == "whole" and len(llm.sent) == 2


def test_max_iterations():
    llm = ScriptedLlm([tool_reply(("echo", {"text": str(i)})) for i in range(10)])
    result, _, events = run(llm)
    assert result.stop_reason == StopReason.MAX_ITERATIONS and result.iterations_used == 4
    assert events[-1].kind == "finished"


def test_missing_results_are_repaired_in_the_request_only():
    history = [
        Message.user("a"),
        Message("assistant", [ToolUseBlock("c1", "echo", "{}"), ToolUseBlock("c2", "echo", "{}")]),
        Message.tool_result("c1", "echo", "r1"),
        Message.user("b"),
    ]
    repaired = repair_missing_results(history)
    assert [m.role for m in repaired] == ["user", "assistant", "tool", "tool", "user"]
    assert repaired[3].tool_result_block().content == NO_RESULT and repaired[3].tool_result_block().is_error
    assert len(history) == 4


class Gate(PermissionGate):
    gates_read_only = False

    def __init__(self, decision):
        self.decision, self.asked = decision, []

    def request(self, req, cancel=None):
        self.asked.append(req.tool_name)
        return self.decision


def test_gate_asked_for_side_effect_tools_only_and_denial_reported():
    gate = Gate(Decision.REJECT_ONCE)
    llm = ScriptedLlm([tool_reply(("echo", {"text": "r"}), ("poke", {"text": "w"})), text_reply("ok")])
    _, history, _ = run(llm, ctx=TurnContext(gate=gate))
    assert gate.asked == ["poke"]
    assert history[2].tool_result_block().content == "r"
    assert history[3].tool_result_block().content == "Permission denied by user."


def test_cancel_during_tool_call_answers_unfinished_calls():
    ctx = TurnContext()
    llm = ScriptedLlm([tool_reply(("echo", {"text": "fast"}), ("echo", {"wait": True}))])
    threading.Timer(0.2, ctx.cancel.cancel).start()
    result, history, events = run(llm, ctx=ctx)
    assert result.stop_reason == StopReason.CANCELLED
    contents = [m.tool_result_block().content for m in history if m.role == "tool"]
    assert contents == ["fast", "Cancelled by user."]
    assert kinds(events).count("tool_result") == 2


def test_cancel_during_model_call():
    ctx = TurnContext()
    threading.Timer(0.1, ctx.cancel.cancel).start()
    result, history, _ = run(ScriptedLlm(["block"]), ctx=ctx)
    assert result.stop_reason == StopReason.CANCELLED and len(history) == 1


def test_overflow_without_room_to_shrink_fails_with_new_session_advice():
    try:
        run(ScriptedLlm([overflow()]))
    except ContextOverflow as e:
        assert "start a new session" in str(e) and "prompt is too long" in str(e)
    else:
        raise AssertionError("expected ContextOverflow")


def test_overflow_trims_older_turns_and_retries():
    history = []
    for i in range(6):
        history += [Message.user(f"q{i} " + "x" * 2000), Message.assistant(f"a{i}")]
    history.append(Message.user("now"))
    llm = ScriptedLlm([overflow(), text_reply("fits")])
    result, _, events = run(llm, history=history)
    assert result.final_response == "fits"
    assert len(llm.sent[1]) < len(llm.sent[0])
    assert "context_trimmed" in kinds(events)
