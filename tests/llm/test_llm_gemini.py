"""Gemini: request building (schemas, signatures), stream parsing, and the wire."""

from __future__ import annotations

import re

import pytest
from fake_llm import FakeLLMServer, Fault, Reply, ToolCall

from openheim.config.agent_config import AgentConfig
from openheim.core.llm.factory import create_client
from openheim.core.llm.gemini import GenerateStreamParser, build_request, retry_delay
from openheim.core.llm.gemini_schema import gemini_schema
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
from openheim.errors import ApiError, ContextOverflow, HttpError, IncompleteResponse

CALL_ID = re.compile(r"call_[0-9a-f]{32}")
MCP_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "$defs": {"Mode": {"type": "string", "enum": ["fast", "slow"]}},
    "properties": {
        "path": {"type": "string", "format": "uri", "description": "where"},
        "mode": {"$ref": "#/$defs/Mode"},
        "limit": {"type": ["integer", "null"], "minimum": 1},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "opt": {"anyOf": [{"type": "string"}, {"type": "null"}], "description": "optional"},
        "either": {"oneOf": [{"type": "string"}, {"type": "integer"}], "title": "x"},
        "kind": {"const": "file"},
        "meta": {"type": "object", "properties": {"k": {"type": "string"}}, "patternProperties": {".*": {}}},
    },
    "required": ["path", "ghost"],
}


def cfg(base: str = "http://x/v1beta", key: str = "", **kw) -> AgentConfig:
    return AgentConfig("gemini", "gemini", base, key, "gemini-test", **kw)


# --- schema & request -------------------------------------------------------------


def test_schema_cleaned_to_gemini_subset():
    s = gemini_schema(MCP_SCHEMA)
    assert s is not None and "additionalProperties" not in str(s) and "$" not in str(s)
    p = s["properties"]
    assert p["path"] == {"type": "string", "description": "where"}
    assert p["mode"] == {"type": "string", "enum": ["fast", "slow"]}
    assert p["limit"] == {"type": "integer", "minimum": 1, "nullable": True}
    assert p["tags"] == {"type": "array", "items": {"type": "string"}}
    assert p["opt"] == {"type": "string", "nullable": True, "description": "optional"}
    assert p["either"] == {"anyOf": [{"type": "string"}, {"type": "integer"}]}
    assert p["kind"] == {"enum": ["file"], "type": "string"}
    assert p["meta"] == {"type": "object", "properties": {"k": {"type": "string"}}}
    assert s["required"] == ["path"]


def test_schema_without_parameters_is_omitted():
    assert gemini_schema({"type": "object", "properties": {}}) is None
    assert gemini_schema(None) is None
    body = build_request([Message.user("x")], [Tool("now", "time", {"type": "object", "properties": {}})], cfg())
    assert body["tools"] == [{"functionDeclarations": [{"name": "now", "description": "time"}]}]


def test_schema_allof_merged_and_recursive_ref_bounded():
    s = gemini_schema(
        {
            "allOf": [
                {"properties": {"a": {"type": "string"}}, "required": ["a"]},
                {"properties": {"b": {"$ref": "#/$defs/Node"}}},
            ],
            "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        }
    )
    assert s["type"] == "object" and s["required"] == ["a"] and set(s["properties"]) == {"a", "b"}


def test_request_shape():
    body = build_request(
        [
            Message.system("a"),
            Message.system("b"),
            Message("user", [TextBlock("look"), ImageBlock("QUJD", "image/png")]),
        ],
        [Tool("f", "d", MCP_SCHEMA)],
        cfg(max_tokens=77),
    )
    assert body["systemInstruction"] == {"role": "user", "parts": [{"text": "a\n\nb"}]}
    assert body["contents"] == [
        {"role": "user", "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/png", "data": "QUJD"}}]}
    ]
    assert body["generationConfig"] == {"maxOutputTokens": 77}
    decl = body["tools"][0]["functionDeclarations"][0]
    assert decl["name"] == "f" and decl["parameters"]["type"] == "object"


def test_history_mapping_with_signatures_and_merged_results():
    assistant = Message(
        "assistant",
        [
            ThinkingBlock("thought"),
            TextBlock("ok"),
            ToolUseBlock("call_1", "f", '{"a":1}', signature="SIG"),
            ToolUseBlock("call_2", "g", "not json"),
        ],
    )
    contents = build_request(
        [
            Message.user("go"),
            assistant,
            Message.tool_result("call_1", "f", "r1"),
            Message.tool_result("call_2", "g", "r2", is_error=True),
            Message.user(""),
        ],
        [],
        cfg(),
    )["contents"]
    assert contents[1] == {
        "role": "model",
        "parts": [
            {"text": "ok"},
            {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "SIG"},
            {"functionCall": {"name": "g", "args": {}}},
        ],
    }
    assert contents[2] == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "f", "response": {"result": "r1"}}},
            {"functionResponse": {"name": "g", "response": {"result": "r2"}}},
        ],
    }
    assert contents[3] == {"role": "user", "parts": [{"text": ""}]} and len(contents) == 4


# --- parser --------------------------------------------------------------------


def chunk(*parts, finish=None, usage=None):
    cand = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        cand["finishReason"] = finish
    out = {"candidates": [cand]}
    if usage:
        out["usageMetadata"] = usage
    return out


def parse(*payloads):
    p = GenerateStreamParser()
    chunks = [c for pl in payloads for c in p.feed(pl)]
    return p, chunks


def test_text_thought_function_calls_and_usage():
    p, chunks = parse(
        chunk({"text": "hm", "thought": True}),
        chunk({"text": "Hi"}),
        chunk(
            {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "S1"}, {"functionCall": {"name": "g"}}
        ),
        chunk({"text": ""}, finish="STOP"),
        {"usageMetadata": {"promptTokenCount": 100, "cachedContentTokenCount": 30, "candidatesTokenCount": 8}},
    )
    assert [(c.kind, c.text) for c in chunks] == [("thinking", "hm"), ("text", "Hi")]
    choice = p.finish()
    think, text, f, g = choice.message.content
    assert think == ThinkingBlock("hm") and text == TextBlock("Hi")
    assert (f.name, f.arguments, f.signature) == ("f", '{"a":1}', "S1") and CALL_ID.fullmatch(f.id)
    assert (g.arguments, g.signature) == ("{}", None) and g.id != f.id
    assert choice.finish_reason is FinishReason.TOOL_CALLS
    assert choice.usage == Usage(input_tokens=70, output_tokens=8, cache_read_tokens=30)


@pytest.mark.parametrize(
    "raw,reason,detail",
    [
        ("STOP", FinishReason.STOP, None),
        ("MAX_TOKENS", FinishReason.MAX_TOKENS, None),
        ("SAFETY", FinishReason.REFUSAL, None),
        ("RECITATION", FinishReason.REFUSAL, None),
        ("PROHIBITED_CONTENT", FinishReason.REFUSAL, None),
        ("SPII", FinishReason.REFUSAL, None),
        ("BLOCKLIST", FinishReason.REFUSAL, None),
        ("MALFORMED_FUNCTION_CALL", FinishReason.OTHER, "malformed_function_call"),
    ],
)
def test_finish_reason_map(raw, reason, detail):
    p, _ = parse(chunk({"text": "x"}, finish=raw))
    assert (p.finish().finish_reason, p.finish().finish_detail) == (reason, detail)


def test_blocked_prompt_is_refusal():
    p, _ = parse({"promptFeedback": {"blockReason": "OTHER"}})
    assert p.finish().finish_reason is FinishReason.REFUSAL


def test_eof_without_finish_reason_is_incomplete():
    p, _ = parse(chunk({"text": "x"}))
    with pytest.raises(IncompleteResponse, match="Gemini stream ended before a finishReason"):
        p.finish()


def test_in_stream_error():
    with pytest.raises(ApiError) as info:
        parse({"error": {"code": 503, "status": "UNAVAILABLE", "message": "The model is overloaded."}})
    assert info.value.retryable
    with pytest.raises(ApiError) as info:
        parse({"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "bad"}})
    assert not info.value.retryable


def test_retry_delay_from_retry_info():
    body = (
        '{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":'
        '"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"34s"}]}}'
    )
    assert retry_delay(body) == 34.0
    assert retry_delay("not json") is None and retry_delay('{"error":{}}') is None


# --- wire ------------------------------------------------------------------------


@pytest.fixture
def srv():
    with FakeLLMServer("gemini") as s:
        yield s


def ask(srv, history=None, tools=(), key="AIza-secret"):
    chunks = []
    c = create_client(cfg(srv.base_url, key=key), base_delay=0.001)
    choice = c.stream(history or [Message.system("sys"), Message.user("hi")], list(tools), chunks.append, CancelToken())
    return choice, chunks


def test_wire_key_in_header_never_in_url(srv):
    ask(srv)
    req = srv.requests[0]
    assert req.path == "/v1beta/models/gemini-test:streamGenerateContent?alt=sse"
    assert req.headers["x-goog-api-key"] == "AIza-secret" and "AIza" not in req.path
    assert req.body["systemInstruction"]["parts"] == [{"text": "sys"}]


def test_wire_tool_round_trip_with_thought_signature(srv):
    srv.enqueue(
        Reply(text="calling", tool_calls=[ToolCall("f", {"a": 1}, signature="TS")], usage=(9, 3)), Reply(text="done")
    )
    tools = [Tool("f", "d", MCP_SCHEMA)]
    choice, chunks = ask(srv, tools=tools)
    call = choice.message.tool_calls()[0]
    assert call.signature == "TS" and CALL_ID.fullmatch(call.id) and "".join(c.text for c in chunks) == "calling"
    assert choice.usage == Usage(9, 3)
    final, _ = ask(srv, [Message.user("hi"), choice.message, Message.tool_result(call.id, "f", "R")], tools)
    assert final.message.text() == "done"
    sent = srv.requests[1].body["contents"]
    assert sent[1]["parts"][1] == {"functionCall": {"name": "f", "args": {"a": 1}}, "thoughtSignature": "TS"}
    assert sent[2]["parts"] == [{"functionResponse": {"name": "f", "response": {"result": "R"}}}]


def test_wire_thinking_and_refusal(srv):
    srv.enqueue(Reply(thinking="deep", text="answer"), Reply(refusal=True))
    _choice, chunks = ask(srv)
    assert [c.kind for c in chunks] == ["thinking", "text"]
    assert ask(srv)[0].finish_reason is FinishReason.REFUSAL


def test_wire_retry_info_delay_is_used(srv):
    srv.enqueue(Fault(status=429, retry_after=0.02), Fault(status=503), Reply(text="ok"))
    assert ask(srv)[0].message.text() == "ok"
    assert len(srv.requests) == 3


def test_wire_retry_info_too_long_refused(srv):
    srv.enqueue(Fault(status=429, retry_after=3600))
    with pytest.raises(HttpError, match="asked to wait 3600 s"):
        ask(srv)


def test_wire_eof_without_finish_is_retried(srv):
    srv.enqueue(Reply(complete=False), Fault(in_stream_error="overloaded"), Reply(text="whole"))
    assert ask(srv)[0].message.text() == "whole"
    assert len(srv.requests) == 3


def test_wire_overflow(srv):
    srv.enqueue(Fault(overflow=True))
    with pytest.raises(ContextOverflow, match="input token count"):
        ask(srv)
    assert len(srv.requests) == 1
