"""OpenAI Chat Completions client, for OpenAI itself (kind "openai") and OpenAI-compatible servers."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from openheim.config.endpoint import join
from openheim.core.llm.base import Chunk
from openheim.core.llm.convert import (
    arguments_text,
    json_text,
    new_call_id,
    reply_blocks,
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

_FINISH = {
    "stop": FinishReason.STOP,
    "tool_calls": FinishReason.TOOL_CALLS,
    "function_call": FinishReason.TOOL_CALLS,
    "length": FinishReason.MAX_TOKENS,
    "content_filter": FinishReason.REFUSAL,
}
_TRANSIENT = (
    "overload",
    "rate limit",
    "rate_limit",
    "ratelimit",
    "too many requests",
    "unavailable",
    "timeout",
    "timed out",
    "server_error",
    "internal",
    "busy",
    "try again",
)
_NO_CHUNKS: list[Chunk] = []
EMPTY_STREAM = (
    "the server sent an empty stream (no content and no finish_reason); the prompt may exceed the "
    "context length loaded on the server: raise it there or shorten the conversation"
)
CUT_STREAM = "OpenAI stream ended before a finish_reason or [DONE]"


# --- request -------------------------------------------------------------------


def build_request(
    messages: list[Message],
    tools: list[Tool],
    cfg: AgentConfig,
    *,
    stream_options: bool = True,
    output: OutputSchema | None = None,
    session_id: str | None = None,
) -> dict[str, Any]:
    """The Chat Completions request body for ``messages`` and ``tools`` (and the answer's JSON Schema); with a
    ``session_id``, a ``prompt_cache_key`` that routes the session's requests to the same prompt cache."""
    body: dict[str, Any] = {"model": cfg.model, "messages": build_messages(messages)}
    if session_id:
        body["prompt_cache_key"] = prompt_cache_key(session_id)
    if tools:
        body["tools"] = [t.to_dict() for t in tools]
    if output is not None:
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": output.name, "schema": output.schema, "strict": output.strict},
        }
    if cfg.max_tokens:
        body["max_completion_tokens" if cfg.kind == "openai" else "max_tokens"] = cfg.max_tokens
    body["stream"] = True
    if stream_options:
        body["stream_options"] = {"include_usage": True}
    return body


def prompt_cache_key(session_id: str) -> str:
    """A stable per-session key that does not reveal the local session id."""
    import hashlib

    return "openheim-" + hashlib.sha256(session_id.encode()).hexdigest()[:32]


def build_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """The messages; a ``tool`` message carries text only, so the images of a reply's tool results follow all
    of its tool messages in one ``user`` message (see ``tool_images_message``)."""
    out: list[dict[str, Any]] = []
    pending: list[ToolResultBlock] = []  # tool results with images, since the last non-tool message
    for m in messages:
        if m.role != "tool" and pending:
            out.append(tool_images_message(pending))
            pending = []
        out.extend(_message(m))
        if m.role == "tool":
            pending.extend(b for b in m.content if isinstance(b, ToolResultBlock) and b.images)
    if pending:
        out.append(tool_images_message(pending))
    return out


def tool_images_message(results: list[ToolResultBlock]) -> dict[str, Any]:
    """One user message with the images of ``results``, each group introduced by the call it came from."""
    parts: list[dict[str, Any]] = []
    for b in results:
        count = "the image" if len(b.images) == 1 else f"the {len(b.images)} images"
        parts.append(
            {"type": "text", "text": f"[{count} attached to the result of tool call {b.tool_call_id} ({b.tool_name})]"}
        )
        parts.extend(_image_part(i) for i in b.images)
    return {"role": "user", "content": parts}


def _image_part(b: ImageBlock) -> dict[str, Any]:
    return {"type": "image_url", "image_url": {"url": f"data:{b.mime_type};base64,{b.data}"}}


def _message(m: Message) -> list[dict[str, Any]]:
    if m.role == "system":
        return [{"role": "system", "content": m.text() or ""}]
    if m.role == "user":
        return [_user(m)]
    if m.role == "tool":
        return [
            {"role": "tool", "content": b.content, "tool_call_id": b.tool_call_id}
            for b in m.content
            if isinstance(b, ToolResultBlock)
        ]
    return _assistant(m)


def _user(m: Message) -> dict[str, Any]:
    if not any(isinstance(b, ImageBlock) for b in m.content):
        return {"role": "user", "content": m.text() or ""}
    parts: list[dict[str, Any]] = []
    for b in m.content:
        if isinstance(b, TextBlock):
            parts.append({"type": "text", "text": b.text})
        elif isinstance(b, ImageBlock):
            parts.append(_image_part(b))
    return {"role": "user", "content": parts}


def _assistant(m: Message) -> list[dict[str, Any]]:
    d: dict[str, Any] = {"role": "assistant"}
    text = m.text()
    if text:
        d["content"] = text
    calls = m.tool_calls()
    if calls:
        d["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": arguments_text(c.arguments)}}
            for c in calls
        ]
    return [d] if len(d) > 1 else []  # thinking is never sent back


# --- stream parsing ----------------------------------------------------------------


class _Call:
    __slots__ = ("args", "id", "name")

    def __init__(self, call_id: str | None) -> None:
        self.id = call_id
        self.name = ""
        self.args: list[str] = []


def parse_usage(u: dict[str, Any]) -> Usage:
    """Chat Completions usage: cached prompt tokens are split out of the input count."""
    prompt = int(u.get("prompt_tokens") or 0)
    details = u.get("prompt_tokens_details") or {}
    cached = int(
        (details.get("cached_tokens") if isinstance(details, dict) else 0) or u.get("prompt_cache_hit_tokens") or 0
    )
    return Usage(
        input_tokens=max(prompt - cached, 0),
        output_tokens=int(u.get("completion_tokens") or 0),
        cache_read_tokens=cached,
    )


def stream_error(payload: dict[str, Any], forwarded: bool) -> Exception:
    """The exception for an in-stream ``{"error": ...}`` (or flat ``"object": "error"``) payload."""
    err = payload.get("error")
    if not isinstance(err, dict):
        err = payload if payload.get("object") == "error" else {"message": str(err)}
    message = str(err.get("message") or err.get("type") or "unknown streaming error")
    facts = f"{message} {err.get('type', '')} {err.get('code', '')} {err.get('status', '')}".lower()
    if is_overflow(400, facts):
        return ContextOverflow(message)
    code = str(err.get("code", ""))
    status = int(code) if code.isdigit() else 0
    transient = any(w in facts for w in _TRANSIENT) or status >= 500 or status in (408, 429)
    return ApiError(f"OpenAI streaming error: {message}", retryable=transient and not forwarded)


_USAGE = {
    "prompt_tokens": NUMBER,
    "completion_tokens": NUMBER,
    "prompt_cache_hit_tokens": NUMBER,
    "prompt_tokens_details": {"cached_tokens": NUMBER},
}
_MESSAGE = {"tool_calls": [{"index": (int, str), "id": str, "function": {"name": str, "arguments": ANY}}]}
SHAPE = {
    "choices": [{"delta": _MESSAGE, "message": _MESSAGE, "finish_reason": str}],
    "usage": _USAGE,
    "x_groq": {"usage": _USAGE},
}


class ChatStreamParser:
    """Accumulates Chat Completions stream payloads into a Choice; ``feed`` returns the chunks to show."""

    wire = "OpenAI Chat Completions"
    shape = SHAPE

    def __init__(self) -> None:
        self.text: list[str] = []
        self.thinking: list[str] = []
        self.calls: list[_Call] = []
        self._by_index: dict[Any, _Call] = {}
        self.finish_reason: str | None = None
        self.done = False
        self.usage: Usage | None = None

    def feed(self, payload: dict[str, Any]) -> list[Chunk]:
        if payload.get("error") or payload.get("object") == "error":
            raise stream_error(payload, bool(self.text or self.thinking))
        usage = payload.get("usage") or (payload.get("x_groq") or {}).get("usage")
        if usage:
            self.usage = parse_usage(usage)
        choices = payload.get("choices")
        if not choices:
            return _NO_CHUNKS
        choice = choices[0]
        finish = choice.get("finish_reason")
        if finish:
            if finish.__class__ is not str:
                raise TypeError("finish_reason is not a string")
            self.finish_reason = finish
        delta = choice.get("delta")
        return self._delta(delta) if delta else _NO_CHUNKS

    def _delta(self, delta: dict[str, Any]) -> list[Chunk]:
        text = delta.get("content")
        if len(delta) == 1 and text and isinstance(text, str):  # most chunks: one text fragment
            self.text.append(text)
            return [Chunk("text", text)]
        out = []
        thinking = delta.get("reasoning_content") or delta.get("reasoning")
        if thinking and isinstance(thinking, str):
            self.thinking.append(thinking)
            out.append(Chunk("thinking", thinking))
        for key in ("content", "refusal"):
            text = delta.get(key)
            if text and isinstance(text, str):
                self.text.append(text)
                out.append(Chunk("text", text))
        if delta.get("tool_calls"):
            self._tool_calls(delta["tool_calls"])
        return out

    def _tool_calls(self, fragments: list[dict[str, Any]]) -> None:
        for frag in fragments:
            index, call_id = frag.get("index"), frag.get("id")
            call = self._by_index.get(index) if index is not None else (self.calls[-1] if self.calls else None)
            if call is None or (call_id and call.id and call_id != call.id):
                call = _Call(call_id)
                self.calls.append(call)
                self._by_index[index] = call
            elif call_id and not call.id:
                call.id = call_id
            fn = frag.get("function") or {}
            name = fn.get("name")
            if name and name != call.name:
                call.name += name
            args = fn.get("arguments")
            if args:
                call.args.append(args if isinstance(args, str) else json_text(args))

    def feed_done(self) -> None:
        self.done = True

    @property
    def complete(self) -> bool:
        return self.done or self.finish_reason is not None

    def finish(self) -> Choice:
        """The assembled reply; IncompleteResponse when the stream never finished."""
        if not self.complete:
            empty = not (self.text or self.thinking or self.calls)
            raise IncompleteResponse(EMPTY_STREAM if empty else CUT_STREAM)
        calls = []
        for c in self.calls:
            if not isinstance(c.id, (str, type(None))):
                raise TypeError(f"a tool call id is {type(c.id).__name__}, not a string")
            if not c.name:
                log.warning("dropping a streamed tool call without a name (id %s)", c.id)
                continue
            args = "".join(c.args)
            calls.append(ToolUseBlock(c.id or new_call_id(), c.name, args if args.strip() else "{}"))
        reason, detail = self._reason(bool(calls))
        return Choice(Message("assistant", reply_blocks(self.thinking, self.text, calls)), reason, detail, self.usage)

    def _reason(self, has_calls: bool) -> tuple[FinishReason | None, str | None]:
        raw = self.finish_reason
        reason = _FINISH.get(raw, FinishReason.OTHER) if raw else None
        if has_calls and reason in (None, FinishReason.STOP):
            return FinishReason.TOOL_CALLS, None
        if not has_calls and reason is FinishReason.TOOL_CALLS:
            return FinishReason.STOP, None
        return reason, (raw if reason is FinishReason.OTHER else None)

    @staticmethod
    def whole(reply: Any) -> list[dict[str, Any]]:
        """A whole (non-streamed) chat.completion as stream payloads, for servers that ignore ``stream``."""
        return [as_stream_payload(reply)]


def as_stream_payload(reply: Any) -> dict[str, Any]:
    """A whole (non-streamed) chat.completion reshaped as one stream payload, for servers that ignore stream."""
    if not isinstance(reply, dict):
        raise TypeError("the reply is not a JSON object")
    if reply.get("error") or reply.get("object") == "error":
        return reply
    choices = reply.get("choices") or [{}]
    message = dict(choices[0].get("message") or {})
    if message.get("tool_calls"):
        message["tool_calls"] = [{**c, "index": i} for i, c in enumerate(message["tool_calls"])]
    out: dict[str, Any] = {"choices": [{"delta": message, "finish_reason": choices[0].get("finish_reason")}]}
    if reply.get("usage"):
        out["usage"] = reply["usage"]
    return out


# --- client ------------------------------------------------------------------------


class OpenAIClient:
    """Streams Chat Completions from ``{api_base}/chat/completions``."""

    native_output = True  # response_format json_schema

    def __init__(self, cfg: AgentConfig, transport: HttpTransport | None = None) -> None:
        self.cfg = cfg
        # OpenAI itself takes a prompt_cache_key; a compatible server may refuse a field it does not know
        self.session_cache = cfg.kind == "openai"
        self.provider_name = cfg.provider_name
        self.model = cfg.model
        self.url = join(cfg.api_base, "/chat/completions")
        self.headers = {
            "Content-Type": "application/json",
            "Accept": "text/event-stream",
            "Accept-Encoding": "identity",
        }
        if cfg.api_key:
            self.headers["Authorization"] = f"Bearer {cfg.api_key}"
        self._http = transport or HttpTransport(cfg.timeout_secs, api_key=cfg.api_key, api_base=cfg.api_base)
        self._stream_options = True

    def stream(
        self,
        messages: list[Message],
        tools: list[Tool],
        on_chunk: OnChunk,
        cancel: CancelToken,
        output: OutputSchema | None = None,
        session_id: str | None = None,
    ) -> Choice:
        body = build_request(
            messages,
            tools,
            self.cfg,
            stream_options=self._stream_options,
            output=output,
            session_id=session_id if self.session_cache else None,
        )
        try:
            return self._once(body, on_chunk, cancel)
        except HttpError as e:
            if e.status != 400 or "stream_options" not in e.body.lower() or "stream_options" not in body:
                raise
        log.info("%s rejected stream_options; retrying without it (usage may be missing)", self.provider_name)
        self._stream_options = False
        body.pop("stream_options")
        return self._once(body, on_chunk, cancel)

    def _once(self, body: dict[str, Any], on_chunk: OnChunk, cancel: CancelToken) -> Choice:
        with self._http.stream(self.url, body, self.headers, cancel) as resp:
            return read_reply(resp, ChatStreamParser(), on_chunk, self.url, estimate=self.cfg.max_cost is not None)
