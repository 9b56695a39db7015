"""OpenAI / OpenAI-compatible Chat Completions: request building, stream parsing, and the wire."""

from __future__ import annotations

import re
import threading
import time

import pytest
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import create_client
from openheim.core.llm.openai import (
    CUT_STREAM,
    ChatStreamParser,
    OpenAIClient,
    build_request,
    stream_error,
)
from openheim.core.models import (
    FinishReason,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolUseBlock,
    Usage,
)
from openheim.core.turn_context import CancelToken
from openheim.errors import (
    ApiError,
    Cancelled,
    ContextOverflow,
    HttpError,
    IncompleteResponse,
    TransportError,
)

CALL_ID = re.compile(r"call_[0-9a-f]{32}")
TOOL = Tool(
    "read_file",
    "Read a file",
    {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"], "additionalProperties": False},
)


def cfg(base: str = "http://x/v1", kind: str = "openai_compatible", key: str = "", **kw) -> AgentConfig:
    return AgentConfig("local", kind, base, key, "model-1", **kw)


# --- request -------------------------------------------------------------------


def test_request_shape_and_limits():
    body = build_request([Message.system("be brief"), Message.user("hi")], [TOOL], cfg(kind="openai", max_tokens=99))
    assert body == {
        "model": "model-1",
        "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}],
        "tools": [TOOL.to_dict()],
        "max_completion_tokens": 99,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    compat = build_request([Message.user("hi")], [], cfg(max_tokens=99), stream_options=False)
    assert compat["max_tokens"] == 99 and "max_completion_tokens" not in compat
    assert "tools" not in compat and "stream_options" not in compat
    assert "max_tokens" not in build_request([], [], cfg())


def test_message_mapping_and_thinking_never_sent_back():
    assistant = Message(
        "assistant",
        [
            ThinkingBlock("secret", "sig"),
            TextBlock("Let me look."),
            ToolUseBlock("call_1", "read_file", '{"path":"a"}'),
            ToolUseBlock("call_2", "read_file", "[1,2]"),
        ],
    )
    image = Message("user", [TextBlock("see"), ImageBlock("QUJD", "image/png")])
    msgs = build_request([image, assistant, Message.tool_result("call_1", "read_file", "data")], [], cfg())["messages"]
    assert msgs[0] == {
        "role": "user",
        "content": [
            {"type": "text", "text": "see"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,QUJD"}},
        ],
    }
    assert msgs[1] == {
        "role": "assistant",
        "content": "Let me look.",
        "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "read_file", "arguments": '{"path":"a"}'}},
            {"id": "call_2", "type": "function", "function": {"name": "read_file", "arguments": "{}"}},
        ],
    }
    assert "reasoning_content" not in str(msgs) and "secret" not in str(msgs)
    assert msgs[2] == {"role": "tool", "content": "data", "tool_call_id": "call_1"}


def test_tool_only_assistant_omits_content_and_empty_assistant_is_dropped():
    msgs = build_request(
        [Message("assistant", [ToolUseBlock("c", "t", "")]), Message("assistant", [ThinkingBlock("only thinking")])],
        [],
        cfg(),
    )["messages"]
    assert msgs == [
        {
            "role": "assistant",
            "tool_calls": [{"id": "c", "type": "function", "function": {"name": "t", "arguments": "{}"}}],
        }
    ]


# --- parser --------------------------------------------------------------------


def delta(d=None, finish=None, **extra):
    return {"choices": [{"index": 0, "delta": d or {}, "finish_reason": finish}], **extra}


def feed_all(*payloads, done=True):
    p = ChatStreamParser()
    chunks = [c for pl in payloads for c in p.feed(pl)]
    if done:
        p.feed_done()
    return p, chunks


def test_text_thinking_and_usage():
    p, chunks = feed_all(
        delta({"role": "assistant", "content": ""}),
        delta({"reasoning_content": "hmm"}),
        delta({"reasoning": " ok"}),
        delta({"content": "Hel"}),
        delta({"content": "lo"}),
        delta(finish="stop"),
        {
            "choices": [],
            "usage": {"prompt_tokens": 100, "completion_tokens": 7, "prompt_tokens_details": {"cached_tokens": 40}},
        },
    )
    assert [(c.kind, c.text) for c in chunks] == [
        ("thinking", "hmm"),
        ("thinking", " ok"),
        ("text", "Hel"),
        ("text", "lo"),
    ]
    choice = p.finish()
    assert choice.message.content == [ThinkingBlock("hmm ok"), TextBlock("Hello")]
    assert choice.finish_reason is FinishReason.STOP
    assert choice.usage == Usage(input_tokens=60, output_tokens=7, cache_read_tokens=40)


def test_reasoning_content_preferred_when_both_fields_carry_the_same_text():
    _, chunks = feed_all(delta({"reasoning_content": "x", "reasoning": "x"}), delta(finish="stop"))
    assert [c.text for c in chunks] == ["x"]


def test_groq_usage_and_deepseek_cache_hits():
    p, _ = feed_all(delta(finish="stop", x_groq={"usage": {"prompt_tokens": 5, "completion_tokens": 2}}))
    assert p.finish().usage == Usage(5, 2)
    p, _ = feed_all(
        delta(finish="stop", usage={"prompt_tokens": 10, "completion_tokens": 1, "prompt_cache_hit_tokens": 4})
    )
    assert p.finish().usage == Usage(6, 1, 0, 4)


def tc(index=None, id=None, name=None, args=None):
    frag = {"function": {}}
    if index is not None:
        frag["index"] = index
    if id is not None:
        frag["id"] = id
    if name is not None:
        frag["function"]["name"] = name
    if args is not None:
        frag["function"]["arguments"] = args
    return delta({"tool_calls": [frag]})


def test_tool_calls_accumulate_by_index_with_interleaving():
    p, _ = feed_all(
        tc(0, "call_a", "read_file", ""),
        tc(1, "call_b", "list_dir", ""),
        tc(0, args='{"pa'),
        tc(1, args="{}"),
        tc(0, name="", args='th":"x"}'),
        delta(finish="tool_calls"),
    )
    calls = p.finish().message.tool_calls()
    assert [(c.id, c.name, c.arguments) for c in calls] == [
        ("call_a", "read_file", '{"path":"x"}'),
        ("call_b", "list_dir", "{}"),
    ]


def test_new_id_on_a_used_index_starts_a_new_call():
    p, _ = feed_all(tc(0, "id1", "a", '{"x":1}'), tc(0, "id2", "b", '{"y":2}'), delta(finish="stop"))
    choice = p.finish()
    assert [(c.id, c.name) for c in choice.message.tool_calls()] == [("id1", "a"), ("id2", "b")]
    assert choice.finish_reason is FinishReason.TOOL_CALLS  # decided by the calls, not finish_reason


def test_calls_without_ids_or_index_get_generated_ids_and_nameless_calls_drop():
    p, _ = feed_all(
        tc(None, None, "a", '{"k":1}'),
        tc(None, None, None, ""),
        tc(5, None, None, '{"orphan":1}'),
        delta(finish="tool_calls"),
    )
    calls = p.finish().message.tool_calls()
    assert len(calls) == 1 and CALL_ID.fullmatch(calls[0].id) and calls[0].arguments == '{"k":1}'


def test_repeated_name_is_not_doubled_and_empty_args_become_object():
    p, _ = feed_all(tc(0, "c", "read_file", ""), tc(0, None, "read_file", ""), delta(finish="tool_calls"))
    assert p.finish().message.tool_calls()[0] == ToolUseBlock("c", "read_file", "{}")


def test_tool_calls_finish_without_calls_is_stop():
    p, _ = feed_all(delta({"content": "hi"}, finish="tool_calls"))
    assert p.finish().finish_reason is FinishReason.STOP


@pytest.mark.parametrize(
    "raw,reason,detail",
    [
        ("stop", FinishReason.STOP, None),
        ("length", FinishReason.MAX_TOKENS, None),
        ("content_filter", FinishReason.REFUSAL, None),
        ("eos_token", FinishReason.OTHER, "eos_token"),
    ],
)
def test_finish_reason_map(raw, reason, detail):
    p, _ = feed_all(delta({"content": "x"}, finish=raw), done=False)
    choice = p.finish()
    assert (choice.finish_reason, choice.finish_detail) == (reason, detail)


def test_done_without_finish_reason_is_complete():
    p, _ = feed_all(delta({"content": "x"}))
    assert p.finish().message.text() == "x"


def test_stream_cut_before_finish_or_done():
    p, _ = feed_all(delta({"content": "x"}), done=False)
    with pytest.raises(IncompleteResponse, match=re.escape(CUT_STREAM)):
        p.finish()


def test_empty_stream_suggests_context_too_small():
    p, _ = feed_all(delta({"role": "assistant"}), done=False)
    with pytest.raises(IncompleteResponse, match="context length loaded on the server"):
        p.finish()


def test_in_stream_errors():
    with pytest.raises(ApiError) as info:
        ChatStreamParser().feed({"error": {"message": "Provider returned error", "code": 502}})
    assert info.value.retryable and "Provider returned error" in str(info.value)
    flat = {"object": "error", "message": "Invalid tool call", "type": "BadRequestError", "code": 400}
    assert not stream_error(flat, False).retryable
    assert not stream_error({"error": {"message": "Overloaded", "type": "overloaded_error"}}, True).retryable
    assert stream_error({"error": {"message": "Rate limit reached", "code": "429"}}, False).retryable
    assert not stream_error({"error": {"message": "Failed to generate a valid tool call"}}, False).retryable
    assert ChatStreamParser().feed({"error": None, "choices": [{"delta": {"content": "ok"}}]})[0].text == "ok"
    overflow = {"error": {"code": "context_length_exceeded", "message": "Your input exceeds the context window"}}
    assert isinstance(stream_error(overflow, False), ContextOverflow)


# --- wire ------------------------------------------------------------------------


@pytest.fixture
def srv():
    with FakeLLMServer("openai") as s:
        yield s


def client(srv, **kw):
    return create_client(cfg(srv.base_url, **kw), base_delay=0.001)


def ask(c, text="hi", tools=(), cancel=None):
    chunks = []
    choice = c.stream([Message.system("sys"), Message.user(text)], list(tools), chunks.append, cancel or CancelToken())
    return choice, chunks


def test_wire_tool_call_round_trip(srv):
    srv.enqueue(Reply(tool_calls=[ToolCall("read_file", {"path": "a.txt"})]), Reply(text="done"))
    c = client(srv, key="sk-test", kind="openai")
    choice, _ = ask(c, "read a.txt", [TOOL])
    call = choice.message.tool_calls()[0]
    assert (call.name, call.arguments, choice.finish_reason) == (
        "read_file",
        '{"path":"a.txt"}',
        FinishReason.TOOL_CALLS,
    )
    history = [Message.user("read a.txt"), choice.message, Message.tool_result(call.id, "read_file", "AAA")]
    final = c.stream(history, [TOOL], lambda ch: None, CancelToken())
    assert final.message.text() == "done"
    req = srv.requests[-1]
    assert req.path == "/v1/chat/completions" and req.headers["Authorization"] == "Bearer sk-test"
    assert req.body["messages"][1]["tool_calls"][0]["id"] == call.id
    assert req.body["messages"][2] == {"role": "tool", "content": "AAA", "tool_call_id": call.id}
    assert req.body["tools"][0]["function"]["parameters"] == TOOL.parameters


def test_wire_streamed_text_order_thinking_and_usage(srv):
    srv.enqueue(
        Reply(text="one two three", thinking="let me think", usage=(12, 5), chunk_size=3, reasoning_field="reasoning")
    )
    choice, chunks = ask(client(srv))
    assert "".join(c.text for c in chunks if c.kind == "text") == "one two three"
    assert "".join(c.text for c in chunks if c.kind == "thinking") == "let me think"
    assert chunks[0].kind == "thinking" and len(chunks) == 9
    assert choice.usage == Usage(12, 5) and choice.message.content[0] == ThinkingBlock("let me think")
    assert "Authorization" not in srv.requests[0].headers  # keyless endpoint


def test_wire_echo_and_finish_length(srv):
    srv.enqueue(Reply(text="cut", finish="length"))
    assert ask(client(srv))[0].finish_reason is FinishReason.MAX_TOKENS
    assert ask(client(srv), "ping")[0].message.text() == "echo: ping"


def test_wire_stream_options_rejected_once_then_dropped(srv):
    srv.enqueue(Fault(status=400, body='{"error":{"message":"Unrecognized request argument: stream_options"}}'))
    c = client(srv)
    assert ask(c)[0].message.text() == "echo: hi"
    assert ask(c)[0].message.text() == "echo: hi"
    assert ["stream_options" in r.body for r in srv.requests] == [True, False, False]


def test_wire_other_400_is_not_retried(srv):
    srv.enqueue(Fault(status=400, body='{"error":{"message":"bad tools"}}'))
    with pytest.raises(HttpError, match="bad tools"):
        ask(client(srv))
    assert len(srv.requests) == 1


def test_wire_429_with_retry_after_then_500_then_success(srv):
    srv.enqueue(Fault(status=429, retry_after="0.05"), Fault(status=500), Reply(text="finally"))
    assert ask(client(srv))[0].message.text() == "finally"
    assert len(srv.requests) == 3


def test_wire_in_stream_error_before_first_chunk_is_retried(srv):
    srv.enqueue(Fault(in_stream_error="overloaded_error"), Reply(text="ok"))
    choice, chunks = ask(client(srv))
    assert choice.message.text() == "ok" and [c.text for c in chunks] == ["ok"]


def test_wire_in_stream_error_after_first_chunk_is_not_retried(srv):
    srv.enqueue(Fault(in_stream_error="overloaded_error", error_after_chunks=2), Reply(text="never"))
    chunks = []
    with pytest.raises(ApiError, match="Overloaded"):
        client(srv).stream([Message.user("x")], [], chunks.append, CancelToken())
    assert len(srv.requests) == 1 and "".join(c.text for c in chunks) == "this rep"


def test_wire_drop_before_first_chunk_is_retried_after_is_not(srv):
    srv.enqueue(Fault(drop_after_chunks=0), Reply(text="second try"))
    assert ask(client(srv))[0].message.text() == "second try"
    srv.enqueue(Fault(drop_after_chunks=2), Reply(text="never"))
    with pytest.raises(TransportError, match="closed mid-response"):
        ask(client(srv))
    assert len(srv.requests) == 3


def test_wire_incomplete_stream_is_retried(srv):
    srv.enqueue(Reply(text="", complete=False), Reply(text="whole"))
    assert ask(client(srv))[0].message.text() == "whole"


def test_wire_overflow_is_not_retried(srv):
    srv.enqueue(Fault(overflow=True))
    with pytest.raises(ContextOverflow, match="maximum context length"):
        ask(client(srv))
    assert len(srv.requests) == 1


def test_wire_max_request_bytes_overflow():
    with FakeLLMServer("openai", max_request_bytes=300) as s:
        assert ask(client(s), "short")[0].message.text() == "echo: short"
        with pytest.raises(ContextOverflow):
            ask(client(s), "long " * 100)


def test_wire_insufficient_quota_not_retried(srv):
    srv.enqueue(Fault(status=429, body='{"error":{"type":"insufficient_quota","code":"insufficient_quota"}}'))
    with pytest.raises(HttpError):
        ask(client(srv))
    assert len(srv.requests) == 1


def test_wire_retry_after_over_a_minute_refused(srv):
    srv.enqueue(Fault(status=429, retry_after=120))
    with pytest.raises(HttpError, match="asked to wait 120 s; try again later"):
        ask(client(srv))
    assert len(srv.requests) == 1


def test_wire_raw_stream_with_comments_and_split_utf8(srv):
    srv.enqueue(
        Reply(
            raw_sse=[
                b": OPENROUTER PROCESSING\n\n",
                'data: {"choices":[{"delta":{"content":"h\xc3'.encode("latin-1"),
                b"\xa9 \xe6\x97",
                b'\xa5"},"finish_reason":null}]}\n',
                b"\n",
                b"data: not-json\n\n",
                b'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n',
            ],
            delay=0.01,
        )
    )
    choice, chunks = ask(client(srv))
    assert choice.message.text() == "hé 日" and [c.text for c in chunks] == ["hé 日"]


def test_wire_missing_done_and_finish_is_incomplete(srv):
    cut = Reply(raw_sse=['data: {"choices":[{"delta":{"content":"x"}}]}\n\n'])
    srv.enqueue(cut, cut)
    with pytest.raises(IncompleteResponse, match=re.escape(CUT_STREAM)):
        ask(client(srv))
    assert len(srv.requests) == 1  # "x" already reached the caller: no retry


def test_wire_lm_studio_empty_200(srv):
    srv.enqueue(Reply(raw_sse=[]))
    with pytest.raises(IncompleteResponse, match="empty stream"):
        ask(OpenAIClient(cfg(srv.base_url)))


def test_wire_cancel_during_slow_stream(srv):
    srv.enqueue(Reply(text="x" * 40, chunk_size=1, delay=0.4))
    token = CancelToken()
    threading.Timer(0.3, token.cancel).start()
    start = time.monotonic()
    with pytest.raises(Cancelled):
        ask(client(srv), cancel=token)
    assert time.monotonic() - start < 0.5


def test_wire_idle_timeout_is_transport_error():
    with FakeLLMServer("openai") as s:
        s.enqueue(Reply(text="a b", delay=2.0))
        start = time.monotonic()
        with pytest.raises(TransportError, match="timeout_secs"):
            ask(OpenAIClient(cfg(s.base_url, timeout_secs=0.3)))
        assert time.monotonic() - start < 1.0


def test_server_that_ignores_stream_and_answers_json():
    import json as _json
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    reply = {
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": "Calling.",
                    "reasoning_content": "plan",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "a", "arguments": "{}"}},
                        {"id": "c2", "type": "function", "function": {"name": "b", "arguments": '{"x":1}'}},
                    ],
                },
            }
        ],
        "usage": {"prompt_tokens": 3, "completion_tokens": 4},
    }

    class Plain(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            data = _json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Plain)
    threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()
    try:
        chunks = []
        choice = OpenAIClient(cfg(f"http://127.0.0.1:{server.server_address[1]}/v1")).stream(
            [Message.user("x")], [], chunks.append, CancelToken()
        )
    finally:
        server.shutdown()
        server.server_close()
    assert [(c.kind, c.text) for c in chunks] == [("thinking", "plan"), ("text", "Calling.")]
    assert [(c.id, c.name) for c in choice.message.tool_calls()] == [("c1", "a"), ("c2", "b")]
    assert choice.usage == Usage(3, 4) and choice.finish_reason is FinishReason.TOOL_CALLS
