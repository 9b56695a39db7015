"""ContextFitter: decides how much of the history goes into each request; the stored history never changes.

Proactive (with a ``context_window``): the request is estimated in bytes (history, system message, tool
definitions) and compared with 90% of the window at 4 bytes per token, or at the ratio the previous call of
the turn reported. Reactive (always): after a ContextOverflow the fitter aims for 75% of the rejected request's
size, at most twice per model call. Cuts happen only just before a user message (never at index 0, never
after the latest user message), so a tool call is never separated from its result and the turn in progress is
always whole. The first kept user message opens with ``[N earlier messages omitted to fit the context window]``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

from openheim.core.models import (
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    Tool,
    ToolResultBlock,
    ToolUseBlock,
    Usage,
)
from openheim.errors import ContextOverflow

FILL_RATIO = 0.9
DEFAULT_BYTES_PER_TOKEN = 4.0
OVERFLOW_SHRINK = 0.75
MAX_OVERFLOW_RETRIES = 2
MESSAGE_OVERHEAD = 16
IMAGE_BYTES = 6000
MIN_BYTES_PER_TOKEN, MAX_BYTES_PER_TOKEN = 1.0, 8.0


def omission_note(dropped: int) -> str:
    return f"[{dropped} earlier messages omitted to fit the context window]"


def _text_bytes(s: str | None) -> int:
    if not s:
        return 0
    return len(s) if s.isascii() else len(s.encode("utf-8", "surrogatepass"))


def message_bytes(message: Message) -> int:
    """The estimated size of a message in a request: its text-like payload plus a fixed overhead."""
    size = MESSAGE_OVERHEAD
    for b in message.content:
        if type(b) is TextBlock:
            size += _text_bytes(b.text)
        elif type(b) is ToolResultBlock:
            size += (
                _text_bytes(b.tool_call_id)
                + _text_bytes(b.tool_name)
                + _text_bytes(b.content)
                + IMAGE_BYTES * len(b.images)
            )
        elif type(b) is ToolUseBlock:
            size += _text_bytes(b.id) + _text_bytes(b.name) + _text_bytes(b.arguments) + _text_bytes(b.signature)
        elif type(b) is ThinkingBlock:
            size += _text_bytes(b.thinking) + _text_bytes(b.signature)
        elif type(b) is RedactedThinkingBlock:
            size += _text_bytes(b.data)
        elif type(b) is ImageBlock:
            size += IMAGE_BYTES
    return size


def tools_bytes(tools: Sequence[Tool]) -> int:
    """The JSON size of the tool definitions."""
    if not tools:
        return 0
    return _text_bytes(json.dumps([t.to_dict() for t in tools], ensure_ascii=False, separators=(",", ":")))


def choose_cut(sizes: Sequence[int], user_indices: Sequence[int], fixed: int, budget: int | None) -> int:
    """The index of the first kept message: 0 when all fits, else the earliest user message that fits."""
    total = fixed + sum(sizes)
    if budget is None or total <= budget or len(user_indices) == 0 or user_indices[-1] == 0:
        return 0
    suffix = total - fixed  # bytes from index `start` to the end
    start = 0
    for index in user_indices:
        if index == 0:
            continue
        suffix -= sum(sizes[start:index])
        start = index
        if suffix + fixed + len(omission_note(index)) <= budget:
            return index
    return user_indices[-1]


@dataclass(eq=False)
class FitResult:
    """What to send: ``messages`` (system first when given), how many were left out, the estimated size."""

    messages: list[Message]
    dropped: int
    sent_bytes: int
    exhausted: bool  # nothing more can be left out: only the current turn is sent


class ContextFitter:
    """Fits a history into a model's context window; keep one per turn (or session) for calibration."""

    def __init__(self, context_window: int | None) -> None:
        self.context_window = context_window if context_window and context_window > 0 else None
        self.bytes_per_token = DEFAULT_BYTES_PER_TOKEN
        self.overflow_limit: int | None = None
        self.retries = 0

    def budget(self) -> int | None:
        """The byte budget for a request, or None when anything goes."""
        limits = [self.overflow_limit] if self.overflow_limit is not None else []
        if self.context_window is not None:
            limits.append(int(self.context_window * FILL_RATIO * self.bytes_per_token))
        return min(limits) if limits else None

    def reset_call(self) -> None:
        """Start a new model call: the overflow retry count goes back to zero."""
        self.retries = 0

    def fit(self, history: Sequence[Message], system: Message | None, tools: Sequence[Tool]) -> FitResult:
        """Choose what to send; ``history`` and its messages are never modified."""
        sizes = [message_bytes(m) for m in history]
        users = [i for i, m in enumerate(history) if m.role == "user"]
        fixed = tools_bytes(tools) + (message_bytes(system) if system is not None else 0)
        cut = choose_cut(sizes, users, fixed, self.budget())
        kept = list(history[cut:])
        sent = fixed + sum(sizes[cut:])
        if cut > 0:
            note = omission_note(cut)
            kept[0] = Message(kept[0].role, [TextBlock(note), *kept[0].content])
            sent += len(note)
        exhausted = not users or cut >= users[-1]
        return FitResult(([system] if system is not None else []) + kept, cut, sent, exhausted)

    def on_overflow(self, result: FitResult) -> bool:
        """Learn from a rejected request; True when sending again (smaller) may help."""
        if result.exhausted or self.retries >= MAX_OVERFLOW_RETRIES:
            return False
        limit = int(result.sent_bytes * OVERFLOW_SHRINK)
        self.overflow_limit = limit if self.overflow_limit is None else min(self.overflow_limit, limit)
        self.retries += 1
        return True

    def calibrate(self, sent_bytes: int, usage: Usage) -> None:
        """Learn bytes per token from a reply's usage (clamped to [1, 8])."""
        tokens = usage.input_tokens + usage.cache_creation_tokens + usage.cache_read_tokens
        if tokens > 0 and sent_bytes > 0:
            ratio = sent_bytes / tokens
            self.bytes_per_token = min(MAX_BYTES_PER_TOKEN, max(MIN_BYTES_PER_TOKEN, ratio))


def turn_too_large(detail: str) -> ContextOverflow:
    """The error for a turn that does not fit even with every earlier message left out."""
    return ContextOverflow(
        f"the current turn alone does not fit in the model's context window ({detail}); "
        f"start a new session or send a shorter request"
    )
