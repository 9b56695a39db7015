"""Pure renderers of the three provider wires for the fake LLM server: streams, error bodies, echo text."""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass
from typing import Any

Event = tuple[bytes, bool]  # (SSE bytes, carries text/thinking)

_dumps = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


@dataclass
class StreamCtx:
    """What a renderer needs to know about the request it answers."""

    model: str
    include_usage: bool
    prompt_estimate: int


def split_text(text: str, chunk_size: int | None) -> list[str]:
    """Pieces of ``text``: ``chunk_size`` characters each, or words (with their trailing space)."""
    if not text:
        return []
    if chunk_size:
        return [text[i : i + chunk_size] for i in range(0, len(text), chunk_size)]
    return re.findall(r"\s*\S+\s*|\s+", text)


def args_text(arguments: Any) -> str:
    return arguments if isinstance(arguments, str) else _dumps(arguments)


def usage_of(reply: Any, ctx: StreamCtx) -> tuple[int, int, int]:
    """(input, output, cached) tokens: the reply's own or an estimate."""
    if reply.usage is None:
        out = (len(reply.text) + len(reply.thinking)) // 4 + 1
        return ctx.prompt_estimate, out, 0
    u = tuple(reply.usage) + (0,)
    return int(u[0]), int(u[1]), int(u[2])


def cache_written(reply: Any) -> int:
    """Tokens written to the prompt cache: the fourth element of ``usage`` (Anthropic reports them)."""
    return int(reply.usage[3]) if reply.usage is not None and len(reply.usage) > 3 else 0


# --- OpenAI Chat Completions ---------------------------------------------------


def _oa(model: str, delta_json: str, finish: str | None = None) -> bytes:
    fin = "null" if finish is None else _dumps(finish)
    return (
        f'data: {{"id":"chatcmpl-fake","object":"chat.completion.chunk","created":0,"model":{_dumps(model)},'
        f'"choices":[{{"index":0,"delta":{delta_json},"finish_reason":{fin}}}]}}\n\n'
    ).encode()


def render_openai(reply: Any, ctx: StreamCtx) -> list[Event]:
    """The SSE events of a Chat Completions stream for ``reply``."""
    m = ctx.model
    out: list[Event] = [(_oa(m, '{"role":"assistant","content":""}'), False)]
    field = _dumps(reply.reasoning_field)
    out += [(_oa(m, f"{{{field}:{_dumps(p)}}}"), True) for p in split_text(reply.thinking, reply.chunk_size)]
    out += [(_oa(m, f'{{"content":{_dumps(p)}}}'), True) for p in split_text(reply.text, reply.chunk_size)]
    for i, tc in enumerate(reply.tool_calls):
        call_id = tc.id or f"call_{uuid.uuid4().hex[:24]}"
        head = {"index": i, "id": call_id, "type": "function", "function": {"name": tc.name, "arguments": ""}}
        out.append((_oa(m, _dumps({"tool_calls": [head]})), False))
        for piece in split_text(args_text(tc.arguments), reply.chunk_size or 8):
            frag = {"index": i, "function": {"arguments": piece}}
            out.append((_oa(m, _dumps({"tool_calls": [frag]})), False))
    if not reply.complete:
        return out
    finish = reply.finish or ("content_filter" if reply.refusal else "tool_calls" if reply.tool_calls else "stop")
    out.append((_oa(m, "{}", finish), False))
    if ctx.include_usage:
        inp, outp, cached = usage_of(reply, ctx)
        usage = {
            "prompt_tokens": inp + cached,
            "completion_tokens": outp,
            "total_tokens": inp + cached + outp,
            "prompt_tokens_details": {"cached_tokens": cached},
        }
        chunk = {
            "id": "chatcmpl-fake",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": m,
            "choices": [],
            "usage": usage,
        }
        out.append((b"data: " + _dumps(chunk).encode() + b"\n\n", False))
    out.append((b"data: [DONE]\n\n", False))
    return out


# --- Anthropic Messages --------------------------------------------------------


def _an(name: str, data: dict) -> bytes:
    return f"event: {name}\ndata: {_dumps(data)}\n\n".encode()


def _an_delta(index: int, delta_json: str) -> bytes:
    return (
        f'event: content_block_delta\ndata: {{"type":"content_block_delta","index":{index},"delta":{delta_json}}}\n\n'
    ).encode()


def _an_block(index: int, block: dict) -> bytes:
    return _an("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def _an_stop(index: int) -> bytes:
    return _an("content_block_stop", {"type": "content_block_stop", "index": index})


def render_anthropic(reply: Any, ctx: StreamCtx) -> list[Event]:
    """The SSE events of a Messages API stream for ``reply``."""
    inp, outp, cached = usage_of(reply, ctx)
    start_usage = {
        "input_tokens": inp,
        "cache_creation_input_tokens": cache_written(reply),
        "cache_read_input_tokens": cached,
        "output_tokens": 1,
    }
    message = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "content": [],
        "model": ctx.model,
        "stop_reason": None,
        "stop_sequence": None,
        "usage": start_usage,
    }
    out: list[Event] = [
        (_an("message_start", {"type": "message_start", "message": message}), False),
        (_an("ping", {"type": "ping"}), False),
    ]
    index = 0
    if reply.thinking:
        out.append((_an_block(index, {"type": "thinking", "thinking": "", "signature": ""}), False))
        out += [
            (_an_delta(index, f'{{"type":"thinking_delta","thinking":{_dumps(p)}}}'), True)
            for p in split_text(reply.thinking, reply.chunk_size)
        ]
        out.append((_an_delta(index, f'{{"type":"signature_delta","signature":{_dumps(reply.signature)}}}'), False))
        out.append((_an_stop(index), False))
        index += 1
    if reply.text:
        out.append((_an_block(index, {"type": "text", "text": ""}), False))
        out += [
            (_an_delta(index, f'{{"type":"text_delta","text":{_dumps(p)}}}'), True)
            for p in split_text(reply.text, reply.chunk_size)
        ]
        out.append((_an_stop(index), False))
        index += 1
    for tc in reply.tool_calls:
        block = {"type": "tool_use", "id": tc.id or f"toolu_{uuid.uuid4().hex[:24]}", "name": tc.name, "input": {}}
        out.append((_an_block(index, block), False))
        for piece in [""] + split_text(args_text(tc.arguments), reply.chunk_size or 8):
            out.append((_an_delta(index, f'{{"type":"input_json_delta","partial_json":{_dumps(piece)}}}'), False))
        out.append((_an_stop(index), False))
        index += 1
    if not reply.complete:
        return out
    stop = reply.finish or ("refusal" if reply.refusal else "tool_use" if reply.tool_calls else "end_turn")
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": stop, "stop_sequence": None},
        "usage": {"output_tokens": outp},
    }
    out.append((_an("message_delta", delta), False))
    out.append((_an("message_stop", {"type": "message_stop"}), False))
    return out


# --- Gemini generateContent ------------------------------------------------------


def _gm(payload: dict) -> bytes:
    return b"data: " + _dumps(payload).encode() + b"\r\n\r\n"


def _gm_part(part_json: str) -> bytes:
    return (
        f'data: {{"candidates":[{{"content":{{"role":"model","parts":[{part_json}]}},"index":0}}]}}\r\n\r\n'
    ).encode()


def render_gemini(reply: Any, ctx: StreamCtx) -> list[Event]:
    """The SSE events of a streamGenerateContent?alt=sse stream for ``reply``."""
    out: list[Event] = [
        (_gm_part(f'{{"text":{_dumps(p)},"thought":true}}'), True) for p in split_text(reply.thinking, reply.chunk_size)
    ]
    out += [(_gm_part(f'{{"text":{_dumps(p)}}}'), True) for p in split_text(reply.text, reply.chunk_size)]
    if reply.tool_calls:
        parts = []
        for tc in reply.tool_calls:
            args = tc.arguments if isinstance(tc.arguments, dict) else json.loads(tc.arguments or "{}")
            part: dict = {"functionCall": {"name": tc.name, "args": args}}
            if tc.signature:
                part["thoughtSignature"] = tc.signature
            parts.append(part)
        out.append((_gm({"candidates": [{"content": {"role": "model", "parts": parts}, "index": 0}]}), False))
    if not reply.complete:
        return out
    inp, outp, cached = usage_of(reply, ctx)
    finish = reply.finish or ("SAFETY" if reply.refusal else "STOP")
    last = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": ""}]}, "finishReason": finish, "index": 0}],
        "usageMetadata": {
            "promptTokenCount": inp + cached,
            "candidatesTokenCount": outp,
            "totalTokenCount": inp + cached + outp,
            "cachedContentTokenCount": cached,
        },
        "modelVersion": ctx.model,
    }
    out.append((_gm(last), False))
    return out


RENDERERS = {"openai": render_openai, "anthropic": render_anthropic, "gemini": render_gemini}


def without_blank_lines(events: list[Event]) -> list[Event]:
    """The same events written back to back: no blank line between them (some servers do this)."""
    out = []
    for data, is_content in events:
        for end in (b"\r\n\r\n", b"\n\n"):
            if data.endswith(end):
                data = data[: -len(end) // 2]
                break
        out.append((data, is_content))
    return out


# --- whole (non-streamed) replies --------------------------------------------------


def _call_args(tc: Any) -> dict:
    return tc.arguments if isinstance(tc.arguments, dict) else json.loads(tc.arguments or "{}")


def whole_openai(reply: Any, ctx: StreamCtx) -> dict:
    """A chat.completion object, as a server that ignores ``stream`` sends it."""
    message: dict = {"role": "assistant", "content": reply.text or None}
    if reply.thinking:
        message[reply.reasoning_field] = reply.thinking
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": tc.id or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": tc.name, "arguments": args_text(tc.arguments)},
            }
            for tc in reply.tool_calls
        ]
    finish = reply.finish or ("content_filter" if reply.refusal else "tool_calls" if reply.tool_calls else "stop")
    inp, outp, cached = usage_of(reply, ctx)
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": ctx.model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {
            "prompt_tokens": inp + cached,
            "completion_tokens": outp,
            "total_tokens": inp + cached + outp,
            "prompt_tokens_details": {"cached_tokens": cached},
        },
    }


def whole_anthropic(reply: Any, ctx: StreamCtx) -> dict:
    """A Message object, as LiteLLM sends it for some models when asked to stream."""
    content: list = []
    if reply.thinking:
        content.append({"type": "thinking", "thinking": reply.thinking, "signature": reply.signature})
    if reply.text:
        content.append({"type": "text", "text": reply.text})
    for tc in reply.tool_calls:
        content.append(
            {
                "type": "tool_use",
                "id": tc.id or f"toolu_{uuid.uuid4().hex[:24]}",
                "name": tc.name,
                "input": _call_args(tc),
            }
        )
    inp, outp, cached = usage_of(reply, ctx)
    stop = reply.finish or ("refusal" if reply.refusal else "tool_use" if reply.tool_calls else "end_turn")
    return {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": ctx.model,
        "content": content,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": inp,
            "output_tokens": outp,
            "cache_creation_input_tokens": cache_written(reply),
            "cache_read_input_tokens": cached,
        },
    }


def whole_gemini(reply: Any, ctx: StreamCtx) -> dict:
    """A GenerateContentResponse object (what generateContent answers)."""
    parts: list = []
    if reply.thinking:
        parts.append({"text": reply.thinking, "thought": True})
    if reply.text:
        parts.append({"text": reply.text})
    for tc in reply.tool_calls:
        part: dict = {"functionCall": {"name": tc.name, "args": _call_args(tc)}}
        if tc.signature:
            part["thoughtSignature"] = tc.signature
        parts.append(part)
    inp, outp, cached = usage_of(reply, ctx)
    return {
        "candidates": [
            {
                "content": {"role": "model", "parts": parts},
                "finishReason": reply.finish or ("SAFETY" if reply.refusal else "STOP"),
                "index": 0,
            }
        ],
        "usageMetadata": {
            "promptTokenCount": inp + cached,
            "candidatesTokenCount": outp,
            "totalTokenCount": inp + cached + outp,
            "cachedContentTokenCount": cached,
        },
        "modelVersion": ctx.model,
    }


WHOLE = {"openai": whole_openai, "anthropic": whole_anthropic, "gemini": whole_gemini}


# --- errors ------------------------------------------------------------------------

_OA_TYPES = {
    400: "invalid_request_error",
    401: "invalid_request_error",
    404: "invalid_request_error",
    429: "rate_limit_exceeded",
    500: "server_error",
    503: "server_error",
}
_AN_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}
_GM_STATUS = {
    400: "INVALID_ARGUMENT",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
}


def error_body(wire: str, status: int, retry_after: float | None = None) -> dict:
    """The wire's usual JSON error body for an HTTP ``status``."""
    msg = f"fake error {status}"
    if wire == "anthropic":
        return {
            "type": "error",
            "error": {"type": _AN_TYPES.get(status, "api_error"), "message": msg},
            "request_id": "req_fake",
        }
    if wire == "gemini":
        err: dict = {"code": status, "message": msg, "status": _GM_STATUS.get(status, "UNKNOWN")}
        if retry_after is not None:
            err["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": f"{retry_after:g}s"}]
        return {"error": err}
    kind = _OA_TYPES.get(status, "api_error")
    return {"error": {"message": msg, "type": kind, "param": None, "code": kind}}


def overflow_body(wire: str, size: int) -> dict:
    """The wire's own context-overflow error (always HTTP 400)."""
    tokens = size // 4 + 1
    if wire == "anthropic":
        return {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": f"prompt is too long: {tokens} tokens > 200000 maximum",
            },
        }
    if wire == "gemini":
        return {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": f"The input token count ({tokens}) exceeds the maximum number of tokens allowed (1048576).",
            }
        }
    return {
        "error": {
            "message": f"This model's maximum context length is 128000 tokens. However, your messages "
            f"resulted in {tokens} tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "context_length_exceeded",
        }
    }


def stream_error(wire: str, kind: str) -> bytes:
    """An error event sent after HTTP 200 (``kind`` like "overloaded_error")."""
    message = "Overloaded" if "overload" in kind else kind
    if wire == "anthropic":
        return _an("error", {"type": "error", "error": {"type": kind, "message": message}})
    if wire == "gemini":
        return _gm({"error": {"code": 503, "status": "UNAVAILABLE", "message": f"{kind}: {message}"}})
    return b"data: " + _dumps({"error": {"message": message, "type": kind, "code": kind}}).encode() + b"\n\n"


# --- requests --------------------------------------------------------------------


def _texts(content: Any, key: str = "text") -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    return "".join(
        p.get(key, "")
        for p in content
        if isinstance(p, dict) and p.get("type", "text") == "text" and isinstance(p.get(key), str)
    )


def last_user_text(wire: str, body: Any) -> str:
    """The text of the last user message that has any (tool-result turns are skipped)."""
    if not isinstance(body, dict):
        return ""
    if wire == "gemini":
        turns, role_key, content_key = body.get("contents") or [], "role", "parts"
    else:
        turns, role_key, content_key = body.get("messages") or [], "role", "content"
    for turn in reversed(turns):
        if isinstance(turn, dict) and turn.get(role_key) == "user":
            text = _texts(turn.get(content_key))
            if text:
                return text
    return ""
