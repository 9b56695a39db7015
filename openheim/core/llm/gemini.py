"""Google Gemini client (generateContent streamed over SSE; key in the x-goog-api-key header only)."""

from __future__ import annotations

import json
import logging
import re
from typing import TYPE_CHECKING, Any

from openheim.config.endpoint import join
from openheim.core.llm.base import Chunk
from openheim.core.llm.convert import (
    arguments_object,
    json_text,
    new_call_id,
    reply_blocks,
    system_text,
)
from openheim.core.llm.gemini_schema import gemini_response_schema, gemini_schema
from openheim.core.llm.http import HttpTransport
from openheim.core.llm.http_errors import is_overflow
from openheim.core.llm.reply import read_reply
from openheim.core.llm.shape import ANY, NUMBER
from openheim.core.models import (
    Choice,
    FinishReason,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from openheim.errors import ApiError, ContextOverflow, HttpError, IncompleteResponse

if TYPE_CHECKING:
    from openheim.config.agent_config import AgentConfig
    from openheim.core.llm.base import OnChunk
    from openheim.core.models import Tool
    from openheim.core.structured import OutputSchema
    from openheim.core.turn_context import CancelToken

log = logging.getLogger(__name__)

REFUSALS = frozenset(
    {
        "SAFETY",
        "RECITATION",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "IMAGE_SAFETY",
        "IMAGE_PROHIBITED_CONTENT",
        "IMAGE_RECITATION",
    }
)
_RETRYABLE_STATUS = frozenset({"UNAVAILABLE", "INTERNAL", "RESOURCE_EXHAUSTED", "DEADLINE_EXCEEDED"})
_NO_CHUNKS: list[Chunk] = []
CUT_STREAM = "Gemini stream ended before a finishReason"


# --- request -------------------------------------------------------------------


def build_request(
    messages: list[Message], tools: list[Tool], cfg: AgentConfig, output: OutputSchema | None = None
) -> dict[str, Any]:
    """The generateContent request body (camelCase); ``output``: the answer's schema, as responseSchema."""
    body: dict[str, Any] = {"contents": build_contents(messages)}
    if tools:
        body["tools"] = [{"functionDeclarations": [_declaration(t) for t in tools]}]
    config: dict[str, Any] = {}
    if cfg.max_tokens:
        config["maxOutputTokens"] = cfg.max_tokens
    if cfg.thinking:
        config["thinkingConfig"] = {"includeThoughts": True}
    if output is not None:
        config["responseMimeType"] = "application/json"
        config["responseSchema"] = gemini_response_schema(output.schema)
    if config:
        body["generationConfig"] = config
    system = system_text(messages)
    if system:
        body["systemInstruction"] = {"role": "user", "parts": [{"text": system}]}
    return body


def _declaration(t: Tool) -> dict[str, Any]:
    d: dict[str, Any] = {"name": t.name, "description": t.description}
    params = gemini_schema(t.parameters)
    if params is not None:
        d["parameters"] = params
    return d


def build_contents(messages: list[Message]) -> list[dict[str, Any]]:
    """user/model turns; tool results become functionResponse parts merged into the preceding user turn, and
    their images follow all of them in that turn (see ``tool_image_parts``)."""
    out: list[dict[str, Any]] = []
    pending: list[ToolResultBlock] = []  # tool results with images, since the last non-tool message
    for m in messages:
        if m.role != "tool" and pending:
            out[-1]["parts"].extend(tool_image_parts(pending))
            pending = []
        if m.role == "system":
            continue
        if m.role == "tool":
            results = [b for b in m.content if isinstance(b, ToolResultBlock)]
            parts = [{"functionResponse": {"name": b.tool_name, "response": {"result": b.content}}} for b in results]
            if out and out[-1]["role"] == "user":
                out[-1]["parts"].extend(parts)
            elif parts:
                out.append({"role": "user", "parts": parts})
            pending.extend(b for b in results if b.images)
        elif m.role == "assistant":
            parts = _model_parts(m)
            if parts:
                out.append({"role": "model", "parts": parts})
        else:
            out.append({"role": "user", "parts": _user_parts(m)})
    if pending:
        out[-1]["parts"].extend(tool_image_parts(pending))
    return out


def tool_image_parts(results: list[ToolResultBlock]) -> list[dict[str, Any]]:
    """The images of ``results`` as inlineData parts, each group introduced by the call it came from: beside
    the functionResponse parts rather than inside them, which only some models accept."""
    parts: list[dict[str, Any]] = []
    for b in results:
        count = "the image" if len(b.images) == 1 else f"the {len(b.images)} images"
        parts.append({"text": f"[{count} attached to the result of the {b.tool_name} call]"})
        parts.extend({"inlineData": {"mimeType": i.mime_type, "data": i.data}} for i in b.images)
    return parts


def _user_parts(m: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append({"text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append({"inlineData": {"mimeType": b.mime_type, "data": b.data}})
    return parts or [{"text": ""}]


def _model_parts(m: Message) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock) and b.text:
            parts.append({"text": b.text})
        elif isinstance(b, ToolUseBlock):
            part: dict[str, Any] = {"functionCall": {"name": b.name, "args": arguments_object(b.arguments)}}
            if b.signature:
                part["thoughtSignature"] = b.signature
            parts.append(part)
    return parts


# --- errors ----------------------------------------------------------------------


def retry_delay(body: str) -> float | None:
    """``RetryInfo.retryDelay`` ("34s", "1.5s") from a Google RPC error body."""
    try:
        details = json.loads(body).get("error", {}).get("details") or []
    except (ValueError, AttributeError):
        return None
    for d in details:
        if isinstance(d, dict) and str(d.get("@type", "")).endswith("RetryInfo"):
            match = re.fullmatch(r"\s*([\d.]+)s\s*", str(d.get("retryDelay", "")))
            if match:
                return float(match.group(1))
    return None


def stream_error(payload: dict[str, Any]) -> Exception:
    """The exception for an in-stream ``{"error": ...}`` payload."""
    raw = payload.get("error")
    err: dict[str, Any] = raw if isinstance(raw, dict) else {"message": str(raw)}
    message = str(err.get("message") or err.get("status") or "unknown streaming error")
    if is_overflow(400, message):
        return ContextOverflow(message)
    code = err.get("code")
    retryable = err.get("status") in _RETRYABLE_STATUS or (isinstance(code, int) and (code >= 500 or code == 429))
    return ApiError(f"Gemini streaming error: {message}", retryable=retryable)


# --- stream parsing ----------------------------------------------------------------


def parse_usage(u: dict[str, Any]) -> Usage:
    cached = int(u.get("cachedContentTokenCount") or 0)
    return Usage(
        input_tokens=max(int(u.get("promptTokenCount") or 0) - cached, 0),
        output_tokens=int(u.get("candidatesTokenCount") or 0),
        cache_read_tokens=cached,
    )


_PART = {"text": str, "functionCall": {"name": str, "args": ANY}, "thoughtSignature": str}
SHAPE = {
    "candidates": [{"content": {"parts": [_PART]}, "finishReason": str}],
    "usageMetadata": {"promptTokenCount": NUMBER, "candidatesTokenCount": NUMBER, "cachedContentTokenCount": NUMBER},
    "promptFeedback": {"blockReason": str},
}


def _text(value: Any, what: str) -> str | None:
    if value is None or value.__class__ is str:
        return value
    raise TypeError(f"{what} is {type(value).__name__}, not a string")


class GenerateStreamParser:
    """Accumulates streamGenerateContent payloads into a Choice; ``feed`` returns the chunks to show."""

    wire = "Gemini generateContent"
    shape = SHAPE

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[ToolUseBlock] = []
        self.finish_reason: str | None = None
        self.usage: Usage | None = None
        self.done = False

    def feed(self, payload: dict[str, Any]) -> list[Chunk]:
        if payload.get("error"):
            raise stream_error(payload)
        if payload.get("usageMetadata"):
            self.usage = parse_usage(payload["usageMetadata"])
        candidates = payload.get("candidates")
        if not candidates:
            blocked = (payload.get("promptFeedback") or {}).get("blockReason")
            if blocked:
                self.finish_reason = "SAFETY" if blocked not in REFUSALS else blocked
            return _NO_CHUNKS
        cand = candidates[0]
        parts = (cand.get("content") or {}).get("parts")
        out = self._parts(parts) if parts else _NO_CHUNKS
        finish = cand.get("finishReason")
        if finish:
            self.finish_reason = _text(finish, "finishReason")
        return out

    def _parts(self, parts: list[dict[str, Any]]) -> list[Chunk]:
        out = []
        for part in parts:
            text = part.get("text")
            if text:
                if text.__class__ is not str:
                    _text(text, "a part's text")
                if part.get("thought"):
                    self.thinking.append(text)
                    out.append(Chunk("thinking", text))
                else:
                    self.text.append(text)
                    out.append(Chunk("text", text))
            call = part.get("functionCall")
            if call:
                name = _text(call.get("name"), "a functionCall's name") or ""
                signature = _text(part.get("thoughtSignature"), "a thoughtSignature")
                self.calls.append(ToolUseBlock(new_call_id(), name, json_text(call.get("args") or {}), signature))
        return out

    def feed_done(self) -> None:
        """The end of a whole (non-streamed) reply, or a ``[DONE]`` line: complete without a finishReason too."""
        self.done = True

    @staticmethod
    def whole(reply: Any) -> list[dict[str, Any]]:
        """A whole generateContent reply (or, without ``alt=sse``, a list of them) as stream payloads."""
        if isinstance(reply, list):
            return reply
        if not isinstance(reply, dict):
            raise TypeError("the reply is not a JSON object")
        return [reply]

    def finish(self) -> Choice:
        """The assembled reply; IncompleteResponse when no finishReason (nor the end of a whole reply) arrived."""
        if self.finish_reason is None and not self.done:
            raise IncompleteResponse(CUT_STREAM)
        content = reply_blocks(self.thinking, self.text, [c for c in self.calls if c.name])
        reason, detail = _reason(self.finish_reason, any(isinstance(b, ToolUseBlock) for b in content))
        return Choice(Message("assistant", content), reason, detail, self.usage)


def _reason(raw: str | None, has_calls: bool) -> tuple[FinishReason, str | None]:
    if raw == "STOP" or raw is None:
        return (FinishReason.TOOL_CALLS if has_calls else FinishReason.STOP), None
    if raw == "MAX_TOKENS":
        return FinishReason.MAX_TOKENS, None
    if raw in REFUSALS:
        return FinishReason.REFUSAL, None
    return FinishReason.OTHER, raw.lower()


# --- client ------------------------------------------------------------------------


class GeminiClient:
    """Streams replies from ``{api_base}/models/{model}:streamGenerateContent?alt=sse``."""

    native_output = True  # responseMimeType application/json + responseSchema

    def __init__(self, cfg: AgentConfig, transport: HttpTransport | None = None) -> None:
        self.cfg = cfg
        self.provider_name = cfg.provider_name
        self.model = cfg.model
        model = cfg.model.removeprefix("models/")
        self.url = join(cfg.api_base, f"/models/{model}:streamGenerateContent?alt=sse")
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if cfg.api_key:
            self.headers["x-goog-api-key"] = cfg.api_key
        self._http = transport or HttpTransport(cfg.timeout_secs, api_key=cfg.api_key, api_base=cfg.api_base)

    def stream(
        self,
        messages: list[Message],
        tools: list[Tool],
        on_chunk: OnChunk,
        cancel: CancelToken,
        output: OutputSchema | None = None,
    ) -> Choice:
        body = build_request(messages, tools, self.cfg, output)
        try:
            with self._http.stream(self.url, body, self.headers, cancel) as resp:
                return read_reply(
                    resp, GenerateStreamParser(), on_chunk, self.url, estimate=self.cfg.max_cost is not None
                )
        except HttpError as e:
            if e.retry_after is None:
                e.retry_after = retry_delay(e.body)
            raise
