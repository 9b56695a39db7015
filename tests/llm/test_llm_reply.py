"""Reading 2xx replies on all three wires against the fake server: whole JSON bodies in place of a
stream, events without blank lines, wrong-shaped JSON, unreadable bodies and oversized events."""

from __future__ import annotations

import json
import logging
import time

import pytest
from fake_llm import FakeLLMServer, Reply, ToolCall

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import create_client
from openheim.core.models import FinishReason, Message, ThinkingBlock, ToolUseBlock
from openheim.core.turn_context import CancelToken
from openheim.errors import ApiError, IncompleteResponse, ParseError

KINDS = {"openai": "openai_compatible", "anthropic": "anthropic", "gemini": "gemini"}
WIRES = list(KINDS)


@pytest.fixture(params=WIRES)
def srv(request):
    with FakeLLMServer(request.param) as s:
        yield s


def ask(srv: FakeLLMServer):
    client = create_client(AgentConfig("p", KINDS[srv.wire], srv.base_url, "sk-k", "fake-model"), base_delay=0.001)
    chunks: list = []
    choice = client.stream([Message.user("hello")], [], chunks.append, CancelToken())
    return choice, "".join(c.text for c in chunks if c.kind == "text")


# --- a whole JSON reply in place of a stream ------------------------------------------------


def test_whole_json_reply_with_text_thinking_and_a_tool_call(srv):
    srv.enqueue(
        Reply(
            text="the whole reply",
            thinking="let me see",
            usage=(12, 7),
            tool_calls=[ToolCall("read_file", {"path": "a.txt"}, id="call_1")],
            whole=True,
        )
    )
    choice, shown = ask(srv)
    assert choice.message.text() == shown == "the whole reply"
    assert choice.finish_reason is FinishReason.TOOL_CALLS
    call = choice.message.tool_calls()[0]
    assert (call.name, json.loads(call.arguments)) == ("read_file", {"path": "a.txt"})
    thinking = [b for b in choice.message.content if isinstance(b, ThinkingBlock)]
    assert thinking and thinking[0].thinking == "let me see"
    assert (choice.usage.input_tokens, choice.usage.output_tokens) == (12, 7)
    assert len(srv.requests) == 1


def test_whole_anthropic_reply_keeps_the_thinking_signature():
    with FakeLLMServer("anthropic") as srv:
        srv.enqueue(Reply(text="ok", thinking="hmm", signature="sig-123", whole=True))
        choice, _ = ask(srv)
    block = next(b for b in choice.message.content if isinstance(b, ThinkingBlock))
    assert block.signature == "sig-123" and choice.finish_reason is FinishReason.STOP


def test_gemini_reply_as_a_json_list():
    """Without alt=sse, Gemini answers a JSON array of response chunks."""
    chunks = [
        {"candidates": [{"content": {"parts": [{"text": "one "}]}}]},
        {"candidates": [{"content": {"parts": [{"text": "two"}]}, "finishReason": "STOP"}]},
    ]
    with FakeLLMServer("gemini") as srv:
        srv.enqueue(Reply(raw_sse=[json.dumps(chunks)], content_type="application/json"))
        assert ask(srv)[0].message.text() == "one two"


def test_json_body_without_a_content_type_is_read_as_json(srv):
    body = json.dumps(srv.render_whole(Reply(text="sniffed"), {"model": "fake-model"}))
    srv.enqueue(Reply(raw_sse=[body], content_type=None))
    assert ask(srv)[0].message.text() == "sniffed"


def test_json_error_object_in_a_200_reply_is_the_providers_error(srv):
    body = {
        "openai": {"error": {"message": "no such model", "type": "invalid_request_error"}},
        "anthropic": {"type": "error", "error": {"type": "invalid_request_error", "message": "no such model"}},
        "gemini": {"error": {"code": 400, "message": "no such model", "status": "INVALID_ARGUMENT"}},
    }[srv.wire]
    srv.enqueue(Reply(raw_sse=[json.dumps(body)], content_type="application/json"))
    with pytest.raises(ApiError, match="no such model"):
        ask(srv)
    assert len(srv.requests) == 1


# --- events without blank lines -----------------------------------------------------------------


def test_events_without_blank_lines_each_count(srv):
    srv.enqueue(Reply(text="back to back events", blank_lines=False, tool_calls=[ToolCall("list_dir", {"path": "."})]))
    choice, shown = ask(srv)
    assert choice.message.text() == shown == "back to back events"
    assert [c.name for c in choice.message.tool_calls()] == ["list_dir"]
    assert len(srv.requests) == 1


def test_a_multi_line_data_event_is_still_joined():
    raw = [
        'data: {"choices":[{"delta":\n',
        'data: {"content":"joined"},\n',
        'data: "finish_reason":"stop"}]}\n\n',
        "data: [DONE]\n\n",
    ]
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(raw_sse=raw))
        assert ask(srv)[0].message.text() == "joined"


# --- wrong-shaped JSON -------------------------------------------------------------------------

OA_END = 'data: {"choices":[{"delta":{},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
AN_START = 'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":1}}}\n\n'
HOSTILE = [
    ("openai", ['data: {"choices":"x"}\n\n', OA_END], "choices is a string, not a list"),
    (
        "openai",
        ['data: {"choices":[],"usage":{"prompt_tokens":"many"}}\n\n', OA_END],
        "usage.prompt_tokens is a string, not a number",
    ),
    (
        "openai",
        [
            'data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":"c","function":{"name":["ls"],'
            '"arguments":"{}"}}]}}]}\n\n',
            OA_END,
        ],
        "choices[0].delta.tool_calls[0].function.name is a list, not a string",
    ),
    (
        "openai",
        ['data: {"choices":[{"delta":{"content":"a"},"finish_reason":7}]}\n\n', OA_END],
        "choices[0].finish_reason is a number, not a string",
    ),
    (
        "anthropic",
        ['event: message_start\ndata: {"type":"message_start","message":"x"}\n\n'],
        "message is a string, not an object",
    ),
    (
        "anthropic",
        [
            AN_START,
            'data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use",'
            '"id":"t","name":["ls"],"input":{}}}\n\n',
        ],
        "content_block.name is a list, not a string",
    ),
    (
        "anthropic",
        [
            AN_START,
            'data: {"type":"content_block_start","index":0,"content_block":{"type":"text"}}\n\n',
            'data: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":5}}\n\n',
        ],
        "delta.text is a number, not a string",
    ),
    (
        "anthropic",
        [AN_START, 'data: {"type":"message_delta","delta":{},"usage":{"output_tokens":"lots"}}\n\n'],
        "usage.output_tokens is a string, not a number",
    ),
    ("gemini", ['data: {"candidates":[5]}\r\n\r\n'], "candidates[0] is a number, not an object"),
    (
        "gemini",
        ['data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":{"a":1}}}]}}]}\r\n\r\n'],
        "candidates[0].content.parts[0].functionCall.name is an object, not a string",
    ),
    (
        "gemini",
        ['data: {"candidates":[{"content":{"parts":[{"text":12}]}}]}\r\n\r\n'],
        "candidates[0].content.parts[0].text is a number, not a string",
    ),
    (
        "gemini",
        ['data: {"usageMetadata":{"promptTokenCount":[1]}}\r\n\r\n'],
        "usageMetadata.promptTokenCount is a list, not a number",
    ),
]


@pytest.mark.parametrize("wire,raw,what", HOSTILE, ids=[h[2].split(" is ")[0] for h in HOSTILE])
def test_wrong_shaped_payload_is_one_unretried_provider_error(wire, raw, what):
    with FakeLLMServer(wire) as srv:
        srv.enqueue(Reply(raw_sse=raw), Reply(text="must not be asked for"))
        with pytest.raises(ApiError) as info:
            ask(srv)
        assert len(srv.requests) == 1
    message = str(info.value)
    assert "sent a malformed" in message and what in message and "\n" not in message and not info.value.retryable


def test_whole_reply_of_the_wrong_shape_names_the_field(srv):
    bad = {
        "openai": {"choices": [{"message": {"tool_calls": [{"function": {"name": 5}}]}}]},
        "anthropic": {"type": "message", "content": "text", "stop_reason": "end_turn"},
        "gemini": {"candidates": "none"},
    }[srv.wire]
    srv.enqueue(Reply(raw_sse=[json.dumps(bad)], content_type="application/json"))
    with pytest.raises(ApiError, match=r"malformed .*(name is a number|content is a string|candidates is a string)"):
        ask(srv)
    assert len(srv.requests) == 1


def test_non_object_payloads_are_skipped_with_a_warning(caplog):
    caplog.set_level(logging.WARNING)
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(raw_sse=["data: [1, 2]\n\n", 'data: {"choices":[{"delta":{"content":"ok"}}]}\n\n', OA_END]))
        assert ask(srv)[0].message.text() == "ok"
    assert "not a JSON object" in caplog.text


def test_invalid_utf8_is_replaced_not_fatal():
    raw = [b'data: {"choices":[{"delta":{"content":"a\xff b"},"finish_reason":"stop"}]}\n\n', b"data: [DONE]\n\n"]
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(raw_sse=raw))
        assert ask(srv)[0].message.text() == "a\ufffd b"


# --- bodies that are not a reply at all -------------------------------------------------------------


@pytest.mark.parametrize(
    "content_type,raw,why",
    [
        (None, "<!DOCTYPE html><html><body><h1>Sign in to the Wi-Fi</h1></body></html>", "an HTML page"),
        ("text/plain", "hello from a web server\n", "not an event stream"),
        ("text/event-stream", "data: hello\n\ndata: world\n\n", "no JSON event in it"),
        ("application/json", '{"choices": [', "not valid JSON"),
    ],
)
def test_unreadable_reply_is_reported_once_with_type_and_first_bytes(srv, content_type, raw, why):
    srv.enqueue(Reply(raw_sse=[raw], content_type=content_type), Reply(text="must not be asked for"))
    with pytest.raises(ApiError) as info:
        ask(srv)
    assert len(srv.requests) == 1 and not info.value.retryable
    message = str(info.value)
    assert why in message and f"content type {content_type or 'none'}" in message
    assert repr(" ".join(raw.split())[:40])[1:-1] in message
    assert "context" not in message and "\n" not in message


def test_an_empty_stream_is_still_an_incomplete_response(srv):
    srv.enqueue(Reply(raw_sse=[": keep-alive\n\n"]), Reply(raw_sse=[]), Reply(text="third time"))
    assert ask(srv)[0].message.text() == "third time"
    assert len(srv.requests) == 3


def test_empty_stream_fails_as_incomplete_when_it_persists():
    with FakeLLMServer("anthropic") as srv:
        srv.enqueue(*[Reply(raw_sse=[]) for _ in range(4)])
        with pytest.raises(IncompleteResponse):
            ask(srv)


# --- huge events ------------------------------------------------------------------------------------


def test_an_oversized_event_fails_at_once_without_retrying(srv):
    line = "data: " + "x" * (512 * 1024) + "\n"
    srv.enqueue(Reply(raw_sse=[line] * 40), Reply(text="must not be asked for"))
    start = time.monotonic()
    with pytest.raises(ParseError, match="larger than 16 MiB"):
        ask(srv)
    assert time.monotonic() - start < 10 and len(srv.requests) == 1


def test_an_event_of_too_many_lines_fails(srv):
    srv.enqueue(Reply(raw_sse=["data: [\n" + "data: 1,\n" * 300 + "data: 1]\n\n"]))
    with pytest.raises(ParseError, match="more than 256 data lines"):
        ask(srv)
    assert len(srv.requests) == 1


def test_tool_call_with_list_id_is_refused_not_stored():
    raw = ['data: {"choices":[{"delta":{"tool_calls":[{"index":0,"id":["x"],"function":{"name":"ls"}}]}}]}\n\n', OA_END]
    with FakeLLMServer("openai") as srv:
        srv.enqueue(Reply(raw_sse=raw))
        with pytest.raises(ApiError, match="tool call id is list"):
            ask(srv)


def test_a_normal_reply_still_has_its_tool_calls(srv):
    srv.enqueue(Reply(text="fine", tool_calls=[ToolCall("ls", {"path": "."}, id="call_9")]))
    choice, _ = ask(srv)
    assert isinstance(choice.message.content[-1], ToolUseBlock) and choice.message.text() == "fine"


# --- every value of every payload replaced by a wrong-typed one: an error or a sound reply, never a crash --

HOSTILE_VALUES = [5, 2.5, "x", "", [], [1], {}, {"a": 1}, None, True, ["list", "of", "str"]]


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, path + (key,))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, path + (i,))


def _replaced(value, path, new):
    if not path:
        return new
    copy = list(value) if isinstance(value, list) else dict(value)
    copy[path[0]] = _replaced(value[path[0]], path[1:], new)
    return copy


def _payloads(wire: str) -> list[tuple[str, dict]]:
    from fake_wires import RENDERERS, StreamCtx

    reply = Reply(
        text="some text",
        thinking="a thought",
        usage=(5, 3, 1),
        tool_calls=[ToolCall("read_file", {"path": "a"}, id="call_1", signature="sig")],
    )
    out = []
    for raw, _ in RENDERERS[wire](reply, StreamCtx("m", True, 10)):
        head, _, data = raw.decode().strip().rpartition("data: ")
        if data != "[DONE]":
            out.append((head, json.loads(data)))
    return out


@pytest.mark.parametrize("wire", WIRES)
def test_no_wrong_typed_value_crashes_a_parser(wire):
    from openheim.core.llm.anthropic import MessagesStreamParser
    from openheim.core.llm.gemini import GenerateStreamParser
    from openheim.core.llm.openai import ChatStreamParser
    from openheim.core.llm.reply import _stream
    from openheim.errors import OpenheimError

    parser_cls = {"openai": ChatStreamParser, "anthropic": MessagesStreamParser, "gemini": GenerateStreamParser}[wire]
    events = _payloads(wire)
    runs = 0
    for n, (_, payload) in enumerate(events):
        for path in _paths(payload):
            for bad in HOSTILE_VALUES:
                stream = [
                    (head + "data: " + json.dumps(_replaced(p, path, bad) if i == n else p) + "\n\n").encode()
                    for i, (head, p) in enumerate(events)
                ] + [b"data: [DONE]\n\n"]
                shown: list = []
                try:
                    choice = _stream(stream, parser_cls(), shown.append, "http://h:1/v1", "text/event-stream")
                except OpenheimError:
                    continue
                finally:
                    runs += 1
                    assert all(type(c.text) is str for c in shown)
                for block in choice.message.content:
                    for attr in ("text", "thinking", "name", "id", "arguments"):
                        assert type(getattr(block, attr, "")) is str, (path, bad, block)
                    assert type(getattr(block, "signature", None)) in (str, type(None)), (path, bad, block)
    assert runs > 500
