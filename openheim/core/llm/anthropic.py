"""Anthropic Messages API client (streaming, prompt caching, adaptive thinking)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openheim.config.endpoint import join
from openheim.core.llm.base import Chunk
from openheim.core.llm.convert import (
    arguments_object,
    json_text,
    new_call_id,
    system_text,
)
from openheim.core.llm.http import HttpTransport
from openheim.core.llm.http_errors import is_overflow
from openheim.core.llm.reply import read_reply
from openheim.core.llm.shape import ANY, NUMBER
from openheim.core.models import (
    Choice,
    FinishReason,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from openheim.errors import ApiError, ContextOverflow, IncompleteResponse

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.llm.base import OnChunk
    from openheim.core.models import Tool
    from openheim.core.turn_context import CancelToken

log = logging.getLogger(__name__)

API_VERSION = "2023-06-01"
DEFAULT_MAX_TOKENS = 16000
CACHE = {"type": "ephemeral"}
_STOP = {
    "tool_use": FinishReason.TOOL_CALLS,
    "end_turn": FinishReason.STOP,
    "max_tokens": FinishReason.MAX_TOKENS,
    "model_context_window_exceeded": FinishReason.MAX_TOKENS,
    "refusal": FinishReason.REFUSAL,
    "pause_turn": FinishReason.PAUSED,
}
_RETRYABLE_ERRORS = frozenset({"overloaded_error", "api_error"})
_NO_CHUNKS: list[Chunk] = []
CUT_STREAM = "Anthropic stream ended before message_stop"


# --- request -------------------------------------------------------------------


def build_request(messages: list[Message], tools: list[Tool], cfg: AgentConfig) -> dict[str, Any]:
    """The Messages API request body, with prompt-cache breakpoints (see ``mark_cache_breakpoints``)."""
    body: dict[str, Any] = {"model": cfg.model, "max_tokens": cfg.max_tokens or DEFAULT_MAX_TOKENS, "stream": True}
    system = system_text(messages)
    if system:
        body["system"] = [{"type": "text", "text": system, "cache_control": CACHE}]
    body["messages"] = build_messages(messages)
    if tools:
        body["tools"] = [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]
        body["tools"][-1]["cache_control"] = CACHE
    mark_cache_breakpoints(body["messages"])
    if cfg.thinking:
        body["thinking"] = {"type": "adaptive", "display": "summarized"}
    return body


def mark_cache_breakpoints(turns: list[dict[str, Any]]) -> None:
    """Rolling cache breakpoints: the last turn, so the next request reads this whole prefix from the cache,
    and the last turn of the previous request (two turns back), which this one reads however many blocks
    were added since. With the system prompt and the last tool that makes 4, the most the API allows."""
    for turn in (turns[-1:] + turns[-3:-2]) if turns else ():
        for block in reversed(turn["content"]):
            if _cacheable(block):
                block["cache_control"] = CACHE
                break


def _cacheable(block: dict[str, Any]) -> bool:
    """Thinking blocks and empty text cannot carry a cache breakpoint."""
    kind = block.get("type")
    return kind not in ("thinking", "redacted_thinking") and not (kind == "text" and not block.get("text"))


def build_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """User/assistant turns; tool results become user turns, consecutive ones merged."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            blocks = [_tool_result(b) for b in m.content if isinstance(b, ToolResultBlock)]
            if out and out[-1]["role"] == "user" and _is_tool_results(out[-1]):
                out[-1]["content"].extend(blocks)
            elif blocks:
                out.append({"role": "user", "content": blocks})
        elif m.role == "assistant":
            blocks = _assistant_blocks(m)
            if blocks:
                out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": "user", "content": _user_blocks(m)})
    return out


def _is_tool_results(turn: dict[str, Any]) -> bool:
    return bool(turn["content"]) and all(b.get("type") == "tool_result" for b in turn["content"])


def _tool_result(b: ToolResultBlock) -> dict[str, Any]:
    """A tool_result block; with images, its content is a list of the text and the images."""
    content: str | list[dict[str, Any]] = b.content
    if b.images:
        content = [{"type": "text", "text": b.content}] if b.content else []
        content.extend(_image(i) for i in b.images)
    d: dict[str, Any] = {"type": "tool_result", "tool_use_id": b.tool_call_id, "content": content}
    if b.is_error:
        d["is_error"] = True
    return d


def _image(b: ImageBlock) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "base64", "media_type": b.mime_type, "data": b.data}}


def _user_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            blocks.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            blocks.append(_image(b))
    return blocks or [{"type": "text", "text": ""}]


def _assistant_blocks(m: Message) -> list[dict[str, Any]]:
    blocks: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, ThinkingBlock):
            if b.signature:  # unsigned thinking cannot be replayed
                blocks.append({"type": "thinking", "thinking": b.thinking, "signature": b.signature})
        elif isinstance(b, RedactedThinkingBlock):
            blocks.append({"type": "redacted_thinking", "data": b.data})
        elif isinstance(b, TextBlock):
            if b.text:
                blocks.append({"type": "text", "text": b.text})
        elif isinstance(b, ToolUseBlock):
            blocks.append({"type": "tool_use", "id": b.id, "name": b.name, "input": arguments_object(b.arguments)})
    return blocks


# --- stream parsing ----------------------------------------------------------------


def parse_usage(u: dict[str, Any], into: Usage) -> None:
    """Copy the fields present in an Anthropic usage object (counts are cumulative: last wins)."""
    if u.get("input_tokens") is not None:
        into.input_tokens = int(u["input_tokens"])
    if u.get("output_tokens") is not None:
        into.output_tokens = int(u["output_tokens"])
    if u.get("cache_creation_input_tokens") is not None:
        into.cache_creation_tokens = int(u["cache_creation_input_tokens"])
    if u.get("cache_read_input_tokens") is not None:
        into.cache_read_tokens = int(u["cache_read_input_tokens"])


def stream_error(payload: dict[str, Any]) -> Exception:
    """The exception for an in-stream ``error`` event."""
    raw = payload.get("error")
    err: dict[str, Any] = raw if isinstance(raw, dict) else {}
    message = str(err.get("message") or "unknown streaming error")
    if is_overflow(400, message):
        return ContextOverflow(message)
    return ApiError(f"Anthropic streaming error: {message}", retryable=err.get("type") in _RETRYABLE_ERRORS)


_USAGE = {
    "input_tokens": NUMBER,
    "output_tokens": NUMBER,
    "cache_creation_input_tokens": NUMBER,
    "cache_read_input_tokens": NUMBER,
}
_BLOCK = {
    "type": str,
    "text": str,
    "thinking": str,
    "signature": str,
    "data": str,
    "id": str,
    "name": str,
    "input": ANY,
}
SHAPE = {
    "message": {"usage": _USAGE},
    "usage": _USAGE,
    "index": int,
    "content_block": _BLOCK,
    "delta": {"type": str, "text": str, "thinking": str, "partial_json": str, "signature": str, "stop_reason": str},
    "content": [_BLOCK],
    "stop_reason": str,
}


def _text(value: Any, what: str) -> str:
    """``value`` when it is a string ("" for null); TypeError (a malformed reply) otherwise."""
    if value is None or value.__class__ is str:
        return value or ""
    raise TypeError(f"{what} is {type(value).__name__}, not a string")


class _Block:
    __slots__ = ("data", "id", "name", "parts", "signature", "type")

    def __init__(self, start: dict[str, Any]) -> None:
        self.type = start.get("type")
        self.parts: list[str] = []
        self.signature = _text(start.get("signature"), "a block's signature") or None
        self.data = _text(start.get("data"), "a redacted_thinking block's data")
        self.id = _text(start.get("id"), "a tool_use block's id")
        self.name = _text(start.get("name"), "a tool_use block's name")
        first = _text(start.get("text") or start.get("thinking"), "a block's text")
        if first:
            self.parts.append(first)
        if self.type == "tool_use" and start.get("input"):
            self.parts.append(json_text(start["input"]))


class MessagesStreamParser:
    """Accumulates Messages API stream events into a Choice; ``feed`` returns the chunks to show."""

    wire = "Anthropic Messages"
    shape = SHAPE

    def __init__(self) -> None:
        self.blocks: dict[Any, _Block] = {}
        self.stop_reason: str | None = None
        self.usage = Usage()
        self.done = False

    def feed(self, payload: dict[str, Any]) -> list[Chunk]:
        kind = payload.get("type")
        if kind == "content_block_delta":
            return self._delta(payload)
        if kind == "content_block_start":
            return self._start(payload)
        if kind == "message_start":
            parse_usage((payload.get("message") or {}).get("usage") or {}, self.usage)
        elif kind == "message_delta":
            self.stop_reason = _text((payload.get("delta") or {}).get("stop_reason"), "stop_reason") or self.stop_reason
            parse_usage(payload.get("usage") or {}, self.usage)
        elif kind == "message_stop":
            self.done = True
        elif kind == "error":
            raise stream_error(payload)
        return _NO_CHUNKS

    def _start(self, payload: dict[str, Any]) -> list[Chunk]:
        start = payload.get("content_block") or {}
        if start.get("type") not in ("text", "thinking", "redacted_thinking", "tool_use"):
            return _NO_CHUNKS  # server tools and future block types are not ours to replay
        block = _Block(start)
        self.blocks[payload.get("index", len(self.blocks))] = block
        if block.parts and block.type in ("text", "thinking"):
            return [Chunk(block.type, block.parts[0])]
        return _NO_CHUNKS

    def _delta(self, payload: dict[str, Any]) -> list[Chunk]:
        block = self.blocks.get(payload.get("index"))
        delta = payload.get("delta") or {}
        if block is None:
            return _NO_CHUNKS
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text")
            if text.__class__ is not str:
                text = _text(text, "a text_delta's text")
            block.parts.append(text)
            return [Chunk("text", text)] if text else _NO_CHUNKS
        if kind == "thinking_delta":
            text = _text(delta.get("thinking"), "a thinking_delta's text")
            block.parts.append(text)
            return [Chunk("thinking", text)] if text else _NO_CHUNKS
        if kind == "input_json_delta":
            block.parts.append(_text(delta.get("partial_json"), "an input_json_delta's partial_json"))
        elif kind == "signature_delta":
            block.signature = _text(delta.get("signature"), "a signature_delta's signature") or block.signature
        return _NO_CHUNKS

    def feed_done(self) -> None:
        """A ``[DONE]`` line (some proxies add one): reading stops; only ``message_stop`` completes the reply."""

    @staticmethod
    def whole(reply: Any) -> list[dict[str, Any]]:
        """A whole (non-streamed) Message as the stream events it stands for."""
        if not isinstance(reply, dict):
            raise TypeError("the reply is not a JSON object")
        if reply.get("type") == "error" or "error" in reply:
            return [{"type": "error", "error": reply.get("error")}]
        events: list[dict[str, Any]] = [{"type": "message_start", "message": {"usage": reply.get("usage")}}]
        for index, block in enumerate(reply.get("content") or []):
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "message_delta", "delta": {"stop_reason": reply.get("stop_reason")}})
        events.append({"type": "message_stop"})
        return events

    def finish(self) -> Choice:
        """The assembled reply; IncompleteResponse without ``message_stop``."""
        if not self.done:
            raise IncompleteResponse(CUT_STREAM)
        content: list = []
        for _, b in sorted(self.blocks.items()):
            text = "".join(b.parts)
            if b.type == "text" and text:
                content.append(TextBlock(text))
            elif b.type == "thinking" and (text or b.signature):
                content.append(ThinkingBlock(text, b.signature))
            elif b.type == "redacted_thinking" and b.data:
                content.append(RedactedThinkingBlock(b.data))
            elif b.type == "tool_use":
                content.append(ToolUseBlock(b.id or new_call_id(), b.name or "", text if text.strip() else "{}"))
        reason = _STOP.get(self.stop_reason, FinishReason.OTHER) if self.stop_reason else None
        detail = self.stop_reason if reason is FinishReason.OTHER else None
        return Choice(Message("assistant", content), reason, detail, self.usage)


# --- client ------------------------------------------------------------------------


class AnthropicClient:
    """Streams replies from ``{api_base}/messages``."""

    def __init__(self, cfg: AgentConfig, transport: HttpTransport | None = None) -> None:
        self.cfg = cfg
        self.provider_name = cfg.provider_name
        self.model = cfg.model
        self.url = join(cfg.api_base, "/messages")
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
            "anthropic-version": API_VERSION,
        }
        if cfg.api_key:
            self.headers["x-api-key"] = cfg.api_key
        self._http = transport or HttpTransport(cfg.timeout_secs, api_key=cfg.api_key, api_base=cfg.api_base)

    def stream(self, messages: list[Message], tools: list[Tool], on_chunk: OnChunk, cancel: CancelToken) -> Choice:
        body = build_request(messages, tools, self.cfg)
        with self._http.stream(self.url, body, self.headers, cancel) as resp:
            return read_reply(resp, MessagesStreamParser(), on_chunk, self.url, estimate=self.cfg.max_cost is not None)
