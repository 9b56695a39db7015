"""Anthropic Messages API: request building (caching, thinking replay), stream parsing, and the wire."""

from __future__ import annotations

import pytest
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.anthropic import MessagesStreamParser, build_messages, build_request
from openheim.core.llm.factory import create_client
from openheim.core.models import (
    FinishReason,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolUseBlock,
    Usage,
)
from openheim.core.turn_context import CancelToken
from openheim.errors import ApiError, ContextOverflow, HttpError, IncompleteResponse

TOOLS = [
    Tool("a", "first", {"type": "object", "properties": {}}),
    Tool("b", "second", {"type": "object", "properties": {"x": {"type": "string"}}}),
]


def cfg(base: str = "http://x/v1", key: str = "", **kw) -> AgentConfig:
    return AgentConfig("claude", "anthropic", base, key, "claude-test", **kw)


# --- request -------------------------------------------------------------------


def test_request_shape_with_caching_and_thinking():
    body = build_request([Message.system("one"), Message.system("two"), Message.user("hi")], TOOLS, cfg(thinking=True))
    assert body["model"] == "claude-test" and body["max_tokens"] == 16000 and body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "one\n\ntwo", "cache_control": {"type": "ephemeral"}}]
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}
    ]
    assert body["tools"][0] == {"name": "a", "description": "first", "input_schema": TOOLS[0].parameters}
    assert body["tools"][1]["cache_control"] == {"type": "ephemeral"} and "cache_control" not in body["tools"][0]
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}


def _breakpoints(body: dict) -> list[str]:
    """Where the request's cache breakpoints are, in the API's prefix order (tools, system, messages)."""
    found = [f"tool {t['name']}" for t in body.get("tools", []) if "cache_control" in t]
    found += ["system" for b in body.get("system", []) if "cache_control" in b]
    found += [
        f"message {i} {b['type']}" for i, m in enumerate(body["messages"]) for b in m["content"] if "cache_control" in b
    ]
    return found


def test_rolling_breakpoints_mark_the_last_turn_and_the_previous_requests_last():
    loop = [Message.system("sys"), Message.user("go")]
    for n in range(3):
        loop += [
            Message("assistant", [ThinkingBlock("t", "sig"), ToolUseBlock(f"toolu_{n}", "a", "{}")]),
            Message.tool_result(f"toolu_{n}", "a", f"r{n}"),
        ]
    body = build_request(loop, TOOLS, cfg())
    assert _breakpoints(body) == ["tool b", "system", "message 4 tool_result", "message 6 tool_result"]
    first = build_request(loop[:2], TOOLS, cfg())
    assert _breakpoints(first) == ["tool b", "system", "message 0 text"]
    # an assistant turn ending in thinking, or an empty user text, carries no breakpoint on those blocks
    body = build_request(
        [Message.user("go"), Message("assistant", [TextBlock("ok"), ThinkingBlock("t", "s")]), Message.user("")],
        [],
        cfg(),
    )
    assert _breakpoints(body) == ["message 0 text"]


def test_optional_fields_omitted():
    body = build_request([Message.user("hi")], [], cfg(max_tokens=512))
    assert body["max_tokens"] == 512
    assert not {"system", "tools", "thinking"} & body.keys()


def test_assistant_blocks_and_tool_results():
    assistant = Message(
        "assistant",
        [
            ThinkingBlock("signed", "sig1"),
            ThinkingBlock("unsigned"),
            RedactedThinkingBlock("opaque"),
            TextBlock(""),
            TextBlock("Checking."),
            ToolUseBlock("toolu_1", "a", '{"x":"1"}'),
            ToolUseBlock("toolu_2", "b", "oops"),
        ],
    )
    msgs = build_messages(
        [
            Message.user("go"),
            assistant,
            Message.tool_result("toolu_1", "a", "r1"),
            Message.tool_result("toolu_2", "b", "boom", is_error=True),
            Message("assistant", [ThinkingBlock("only unsigned")]),
            Message.user(""),
        ]
    )
    assert msgs[1] == {
        "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "signed", "signature": "sig1"},
            {"type": "redacted_thinking", "data": "opaque"},
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "a", "input": {"x": "1"}},
            {"type": "tool_use", "id": "toolu_2", "name": "b", "input": {}},
        ],
    }
    assert msgs[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "r1"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "content": "boom", "is_error": True},
        ],
    }
    assert msgs[3] == {"role": "user", "content": [{"type": "text", "text": ""}]}  # empty assistant dropped
    assert len(msgs) == 4


def test_image_block():
    msgs = build_request([Message("user", [ImageBlock("QUJD", "image/jpeg"), TextBlock("what?")])], [], cfg())[
        "messages"
    ]
    assert msgs[0]["content"][0] == {
        "type": "image",
        "source": {"type": "base64", "media_type": "image/jpeg", "data": "QUJD"},
    }


# --- parser --------------------------------------------------------------------


def start(index, **block):
    return {"type": "content_block_start", "index": index, "content_block": block}


def d(index, **delta):
    return {"type": "content_block_delta", "index": index, "delta": delta}


def run(*events, stop=True):
    p = MessagesStreamParser()
    chunks = [c for e in events for c in p.feed(e)]
    if stop:
        p.feed({"type": "message_stop"})
    return p, chunks


MESSAGE_START = {
    "type": "message_start",
    "message": {
        "usage": {
            "input_tokens": 50,
            "output_tokens": 1,
            "cache_creation_input_tokens": 20,
            "cache_read_input_tokens": 300,
        }
    },
}


def test_full_stream_with_thinking_text_and_tool():
    p, chunks = run(
        MESSAGE_START,
        {"type": "ping"},
        start(0, type="thinking", thinking="", signature=""),
        d(0, type="thinking_delta", thinking="hm"),
        d(0, type="signature_delta", signature="SIG"),
        {"type": "content_block_stop", "index": 0},
        start(1, type="text", text=""),
        d(1, type="text_delta", text="Hi"),
        start(2, type="tool_use", id="toolu_9", name="a", input={}),
        d(2, type="input_json_delta", partial_json=""),
        d(2, type="input_json_delta", partial_json='{"x":'),
        d(2, type="input_json_delta", partial_json='"1"}'),
        start(3, type="tool_use", id="toolu_10", name="b", input={}),
        start(4, type="server_tool_use", id="srv", name="web_search"),
        {"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 42}},
    )
    assert [(c.kind, c.text) for c in chunks] == [("thinking", "hm"), ("text", "Hi")]
    choice = p.finish()
    assert choice.message.content == [
        ThinkingBlock("hm", "SIG"),
        TextBlock("Hi"),
        ToolUseBlock("toolu_9", "a", '{"x":"1"}'),
        ToolUseBlock("toolu_10", "b", "{}"),
    ]
    assert choice.finish_reason is FinishReason.TOOL_CALLS
    assert choice.usage == Usage(input_tokens=50, output_tokens=42, cache_creation_tokens=20, cache_read_tokens=300)


@pytest.mark.parametrize(
    "raw,reason",
    [
        ("end_turn", FinishReason.STOP),
        ("max_tokens", FinishReason.MAX_TOKENS),
        ("model_context_window_exceeded", FinishReason.MAX_TOKENS),
        ("refusal", FinishReason.REFUSAL),
        ("pause_turn", FinishReason.PAUSED),
        ("stop_sequence", FinishReason.OTHER),
    ],
)
def test_stop_reason_map(raw, reason):
    p, _ = run({"type": "message_delta", "delta": {"stop_reason": raw}, "usage": {"output_tokens": 1}})
    choice = p.finish()
    assert choice.finish_reason is reason
    assert choice.finish_detail == (raw if reason is FinishReason.OTHER else None)


def test_redacted_thinking_and_empty_text_dropped():
    p, _ = run(start(0, type="redacted_thinking", data="xyz"), start(1, type="text", text=""))
    assert p.finish().message.content == [RedactedThinkingBlock("xyz")]


def test_missing_message_stop_is_incomplete():
    p, _ = run(MESSAGE_START, stop=False)
    with pytest.raises(IncompleteResponse, match="Anthropic stream ended before message_stop"):
        p.finish()


def test_error_events():
    with pytest.raises(ApiError) as info:
        run({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}})
    assert info.value.retryable and str(info.value) == "API error: Anthropic streaming error: Overloaded"
    with pytest.raises(ApiError) as info:
        run({"type": "error", "error": {"type": "invalid_request_error"}})
    assert not info.value.retryable and "unknown streaming error" in str(info.value)
    with pytest.raises(ContextOverflow):
        run({"type": "error", "error": {"type": "invalid_request_error", "message": "prompt is too long: 9 > 8"}})


# --- wire ------------------------------------------------------------------------


@pytest.fixture
def srv():
    with FakeLLMServer("anthropic") as s:
        yield s


def ask(srv, history=None, tools=(), key="sk-ant"):
    chunks = []
    c = create_client(cfg(srv.base_url, key=key, thinking=True), base_delay=0.001)
    choice = c.stream(history or [Message.system("sys"), Message.user("hi")], list(tools), chunks.append, CancelToken())
    return choice, chunks


def test_wire_headers_and_path(srv):
    ask(srv)
    req = srv.requests[0]
    assert req.path == "/v1/messages"
    assert req.headers["x-api-key"] == "sk-ant" and req.headers["anthropic-version"] == "2023-06-01"
    assert "authorization" not in req.headers and "anthropic-beta" not in req.headers
    assert req.body["system"][0]["cache_control"] == {"type": "ephemeral"}


def test_wire_thinking_text_tool_round_trip(srv):
    srv.enqueue(
        Reply(thinking="plan", text="Reading.", tool_calls=[ToolCall("b", {"x": "1"})], usage=(30, 9, 100)),
        Reply(text="done"),
    )
    choice, chunks = ask(srv, tools=TOOLS)
    assert next(c.kind for c in chunks) == "thinking" and "".join(c.text for c in chunks) == "planReading."
    thinking, text, call = choice.message.content
    assert thinking == ThinkingBlock("plan", "sig_fake") and text == TextBlock("Reading.")
    assert (call.name, call.arguments) == ("b", '{"x":"1"}') and call.id.startswith("toolu_")
    assert choice.usage == Usage(30, 9, 0, 100)
    history = [Message.user("hi"), choice.message, Message.tool_result(call.id, "b", "ok")]
    final, _ = ask(srv, history, TOOLS)
    assert final.message.text() == "done"
    sent = srv.requests[1].body["messages"]
    assert sent[1]["content"][0] == {"type": "thinking", "thinking": "plan", "signature": "sig_fake"}
    assert sent[2]["content"][0]["tool_use_id"] == call.id


def test_wire_pause_turn_and_refusal(srv):
    srv.enqueue(Reply(text="paused", finish="pause_turn"), Reply(refusal=True))
    assert ask(srv)[0].finish_reason is FinishReason.PAUSED
    assert ask(srv)[0].finish_reason is FinishReason.REFUSAL


def test_wire_529_then_in_stream_overload_then_success(srv):
    srv.enqueue(Fault(status=529), Fault(in_stream_error="overloaded_error"), Reply(text="ok"))
    assert ask(srv)[0].message.text() == "ok"
    assert len(srv.requests) == 3


def test_wire_in_stream_error_after_first_chunk_not_retried(srv):
    srv.enqueue(Fault(in_stream_error="overloaded_error", error_after_chunks=1))
    with pytest.raises(ApiError, match="Overloaded"):
        ask(srv)
    assert len(srv.requests) == 1


def test_wire_overflow_and_429(srv):
    srv.enqueue(Fault(overflow=True))
    with pytest.raises(ContextOverflow, match="prompt is too long"):
        ask(srv)
    srv.enqueue(Fault(status=429, retry_after="0.02"), Reply(text="after wait"))
    assert ask(srv)[0].message.text() == "after wait"
    srv.enqueue(Fault(status=401))
    with pytest.raises(HttpError, match="authentication_error"):
        ask(srv)
    assert len(srv.requests) == 4


def test_wire_missing_message_stop_retried_then_fails(srv):
    srv.enqueue(*[Reply(text="", complete=False)] * 4)
    with pytest.raises(IncompleteResponse):
        ask(srv)
    assert len(srv.requests) == 4


def test_wire_keyless_sends_no_key(srv):
    ask(srv, key="")
    assert "x-api-key" not in srv.requests[0].headers


def test_text_in_block_start_is_streamed_too():
    p, chunks = run(start(0, type="text", text="Hello"), d(0, type="text_delta", text="!"))
    assert [c.text for c in chunks] == ["Hello", "!"] and p.finish().message.text() == "Hello!"
