"""The shared data model: messages, content blocks, tools, replies, usage and stream events.

The JSON shapes (``to_dict``/``from_dict``) are the on-disk history format.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from enum import Enum
from typing import Any

# --- content blocks --------------------------------------------------------


@dataclass
class TextBlock:
    """Plain text."""

    text: str
    type: str = field(default="text", init=False, repr=False)

    def to_dict(self) -> dict:
        return {"type": "text", "text": self.text}


@dataclass
class ThinkingBlock:
    """The model's visible reasoning (``signature`` lets providers verify it)."""

    thinking: str
    signature: str | None = None
    type: str = field(default="thinking", init=False, repr=False)

    def to_dict(self) -> dict:
        d = {"type": "thinking", "thinking": self.thinking}
        if self.signature is not None:
            d["signature"] = self.signature
        return d


@dataclass
class RedactedThinkingBlock:
    """Reasoning the provider returned encrypted; sent back as is."""

    data: str
    type: str = field(default="redacted_thinking", init=False, repr=False)

    def to_dict(self) -> dict:
        return {"type": "redacted_thinking", "data": self.data}


@dataclass
class ImageBlock:
    """An image, base64-encoded."""

    data: str  # base64
    mime_type: str
    type: str = field(default="image", init=False, repr=False)

    def to_dict(self) -> dict:
        return {"type": "image", "data": self.data, "mime_type": self.mime_type}


@dataclass
class ToolUseBlock:
    """A tool call the model made."""

    id: str
    name: str
    arguments: str  # JSON text, exactly as the model produced it
    signature: str | None = None
    type: str = field(default="tool_use", init=False, repr=False)

    def to_dict(self) -> dict:
        d = {"type": "tool_use", "id": self.id, "name": self.name, "arguments": self.arguments}
        if self.signature is not None:
            d["signature"] = self.signature
        return d


@dataclass
class ToolResultBlock:
    """A tool call's result, answering the ToolUseBlock with ``tool_call_id``; ``images`` go with its text."""

    tool_call_id: str
    tool_name: str
    content: str
    is_error: bool = False
    images: list[ImageBlock] = field(default_factory=list)
    type: str = field(default="tool_result", init=False, repr=False)

    def to_dict(self) -> dict:
        d: dict[str, object] = {
            "type": "tool_result",
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "content": self.content,
        }
        if self.is_error:
            d["is_error"] = True
        if self.images:
            d["images"] = [i.to_dict() for i in self.images]
        return d


ContentBlock = TextBlock | ThinkingBlock | RedactedThinkingBlock | ImageBlock | ToolUseBlock | ToolResultBlock

_BLOCK_TYPES: dict[str, type[ContentBlock]] = {
    "text": TextBlock,
    "thinking": ThinkingBlock,
    "redacted_thinking": RedactedThinkingBlock,
    "image": ImageBlock,
    "tool_use": ToolUseBlock,
    "tool_result": ToolResultBlock,
}


def _field_types() -> dict[str, dict[str, str]]:

    return {kind: {f.name: str(f.type) for f in fields(cls) if f.init} for kind, cls in _BLOCK_TYPES.items()}


_FIELD_TYPES = _field_types()  # a block read from a log must have the types its class promises


def block_from_dict(d: dict) -> ContentBlock:
    """Rebuild a content block from its JSON shape; unknown types raise ValueError."""
    kind = d.get("type")
    cls = _BLOCK_TYPES.get(kind) if isinstance(kind, str) else None  # a list or dict is not a type either
    if cls is None:
        raise ValueError(f"unknown content block type {kind!r}")
    fields = {k: v for k, v in d.items() if k != "type"}
    types = _FIELD_TYPES[str(kind)]  # kind is a str here: it named a block type
    for name, value in fields.items():
        expected = types.get(name)
        if expected is not None and not _has_type(value, expected):
            raise ValueError(f"bad {kind} block: '{name}' must be {expected}, not {type(value).__name__}")
    if "images" in fields:
        fields["images"] = _images(fields["images"])
    try:
        return cls(**fields)
    except TypeError as e:
        raise ValueError(f"bad {kind} block: {e}") from None


def _images(value: object) -> list[ImageBlock]:
    """A tool result's stored images: a list of image blocks, or ValueError."""
    blocks: list[ImageBlock] = []
    for d in value if isinstance(value, list) else [None]:
        block = block_from_dict(d) if isinstance(d, dict) else None
        if not isinstance(block, ImageBlock):
            raise ValueError("bad tool_result block: 'images' must be a list of image blocks")
        blocks.append(block)
    return blocks


def _has_type(value: object, expected: str) -> bool:
    """Whether ``value`` fits a block field's annotation (``str``, ``bool``, ``str | None``)."""
    if value is None:
        return expected.endswith("| None")
    base = expected.removesuffix(" | None")
    return isinstance(value, bool) if base == "bool" else isinstance(value, str) if base == "str" else True


# --- messages ---------------------------------------------------------------

ROLES = ("system", "user", "assistant", "tool")


@dataclass
class Message:
    """One message of a conversation: a role and its content blocks."""

    role: str
    content: list[ContentBlock] = field(default_factory=list)

    @classmethod
    def system(cls, text: str) -> Message:
        return cls("system", [TextBlock(text)])

    @classmethod
    def user(cls, text: str) -> Message:
        return cls("user", [TextBlock(text)] if text else [])

    @classmethod
    def assistant(cls, text: str) -> Message:
        return cls("assistant", [TextBlock(text)] if text else [])

    @classmethod
    def tool_result(
        cls,
        tool_call_id: str,
        tool_name: str,
        content: str,
        is_error: bool = False,
        images: list[ImageBlock] | None = None,
    ) -> Message:
        return cls("tool", [ToolResultBlock(tool_call_id, tool_name, content, is_error, list(images or []))])

    def text(self) -> str | None:
        """All text blocks joined; None when there are none or they are empty."""
        joined = "".join(b.text for b in self.content if isinstance(b, TextBlock))
        return joined or None

    def tool_calls(self) -> list[ToolUseBlock]:
        return [b for b in self.content if isinstance(b, ToolUseBlock)]

    def tool_result_block(self) -> ToolResultBlock | None:
        return next((b for b in self.content if isinstance(b, ToolResultBlock)), None)

    def to_dict(self) -> dict:
        return {"role": self.role, "content": [b.to_dict() for b in self.content]}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> Message:
        role = d.get("role")
        if role not in ROLES:
            raise ValueError(f"unknown message role {role!r}")
        content = d.get("content") or []
        if isinstance(content, str):  # tolerate the plain-string shape
            content = [{"type": "text", "text": content}]
        return cls(role, [block_from_dict(b) for b in content])


def transcript(messages: list[Message]) -> list[tuple[str, ContentBlock]]:
    """The displayable (role, block) entries of a conversation, in stored order."""
    out: list[tuple[str, ContentBlock]] = []
    for m in messages:
        if m.role == "system":
            continue
        for b in m.content:
            if isinstance(b, RedactedThinkingBlock):
                continue
            if isinstance(b, TextBlock) and not b.text:
                continue
            if isinstance(b, ThinkingBlock) and not b.thinking:
                continue
            out.append((m.role, b))
    return out


# --- tools, replies, usage ------------------------------------------------


@dataclass
class Tool:
    """A tool definition as offered to the model."""

    name: str
    description: str
    parameters: dict

    def to_dict(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class FinishReason(str, Enum):
    STOP = "stop"
    TOOL_CALLS = "tool_calls"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    PAUSED = "paused"
    OTHER = "other"


@dataclass
class Usage:
    """Token counts of one model call (or a sum of them)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def total(self) -> int:
        return self.input_tokens + self.output_tokens + self.cache_creation_tokens + self.cache_read_tokens

    @property
    def prompt_tokens(self) -> int:
        """Everything the model read: fresh input plus cache traffic."""
        return self.input_tokens + self.cache_creation_tokens + self.cache_read_tokens

    def to_dict(self) -> dict:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_tokens": self.cache_creation_tokens,
            "cache_read_tokens": self.cache_read_tokens,
        }

    @classmethod
    def from_dict(cls, d: dict | None) -> Usage | None:
        if not d:
            return None
        return cls(
            **{
                k: int(d.get(k) or 0)
                for k in ("input_tokens", "output_tokens", "cache_creation_tokens", "cache_read_tokens")
            }
        )

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_creation_tokens + other.cache_creation_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
        )


@dataclass
class Choice:
    """One complete model reply."""

    message: Message
    finish_reason: FinishReason | None = None
    finish_detail: str | None = None  # the raw provider reason when finish_reason is OTHER
    usage: Usage | None = None


class StopReason(str, Enum):
    END_TURN = "end_turn"
    MAX_ITERATIONS = "max_iterations"
    MAX_TOKENS = "max_tokens"
    REFUSAL = "refusal"
    CANCELLED = "cancelled"
    NO_CONTENT = "no_content"
    BUDGET = "budget"  # the turn's token, time or cost budget ran out (``AgentResult.budget`` says which)
    INVALID_OUTPUT = "invalid_output"  # the answer did not match the output schema, even after a repair round

    @property
    def notice(self) -> str | None:
        """The one-line user-facing explanation, if this stop needs one."""
        return _STOP_NOTICES.get(self)


_STOP_NOTICES = {
    StopReason.MAX_ITERATIONS: "stopped at the iteration limit (max_iterations) before finishing",
    StopReason.MAX_TOKENS: "the response was cut off at the output token limit (max_tokens)",
    StopReason.REFUSAL: "the model declined to respond",
    StopReason.NO_CONTENT: "the model returned an empty response",
    StopReason.BUDGET: "stopped at the turn's budget",
    StopReason.INVALID_OUTPUT: "the answer did not match the output schema",
}


@dataclass(frozen=True)
class Budget:
    """A budget a turn ran out of: ``kind`` "tokens" (``used`` tokens), "time" (``used`` seconds elapsed) or
    "cost" (``used`` US dollars)."""

    kind: str
    limit: float
    used: float

    def to_dict(self) -> dict:
        if self.kind == "time":
            return {"kind": "time", "limit": self.limit, "elapsed": round(self.used, 2)}
        if self.kind == "cost":
            return {"kind": "cost", "limit": self.limit, "used": round(self.used, 6)}
        return {"kind": self.kind, "limit": int(self.limit), "used": int(self.used)}

    @property
    def notice(self) -> str:
        if self.kind == "cost":
            return (
                f"stopped at the turn's cost budget: ${self.used:.4f} spent of ${self.limit:g} "
                "(--max-cost / [budgets] max_cost)"
            )
        if self.kind == "time":
            return (
                f"stopped at the turn's time budget: {self.used:.1f}s elapsed of {self.limit:g}s "
                "(--timeout / turn_timeout_secs)"
            )
        return (
            f"stopped at the turn's token budget: {int(self.used)} tokens used of {int(self.limit)} "
            "(--max-tokens-total / max_tokens_total)"
        )


@dataclass
class AgentResult:
    """How a turn ended: the reply, why it stopped, and what it used."""

    final_response: str | None
    iterations_used: int
    stop_reason: StopReason
    usage: Usage = field(default_factory=Usage)  # summed over the turn's calls (a session's: subagents' too)
    context_usage: Usage | None = None  # the last call's usage: what the context holds
    budget: Budget | None = None  # the budget that stopped the turn (stop_reason BUDGET)
    structured: Any = None  # the answer parsed and validated against the turn's output schema
    output_error: str | None = None  # why the answer did not match it (stop_reason INVALID_OUTPUT)
    cost: float | None = None  # US dollars the turn spent, subagents included (None: the model has no price)
