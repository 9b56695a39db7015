"""Compaction: when a request would pass ``compact_at`` of the model's context window, the conversation so far is
summarised by the model (or ``compaction_model``) with a dedicated prompt, and the model then sees that summary
plus the recent turns, word for word. The log keeps every message; the compaction is an event in it, so a
resumed session starts from the compacted state. When the summary call fails, the agent loop falls back to
fitting (the oldest messages are left out), so a turn never dead-ends here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from openheim.conversation.log_events import CompactionRecord
from openheim.core import events
from openheim.core.context import message_bytes, tools_bytes
from openheim.core.models import Message, TextBlock, ToolResultBlock, ToolUseBlock, Usage
from openheim.errors import Cancelled, OpenheimError

if TYPE_CHECKING:
    from openheim.config.long_sessions import CompactionConfig
    from openheim.core.llm.base import LlmClient
    from openheim.core.models import Tool
    from openheim.core.turn_context import CancelToken

log = logging.getLogger(__name__)

OnEvent = Callable[[events.StreamEvent], None]

SUMMARY_SYSTEM = (
    "You are compacting a long conversation between a user and a coding agent so that the agent can continue "
    "the work with only your summary and the latest messages. Write a summary that the agent can act on."
)

SUMMARY_PROMPT = """Summarise the conversation above for the agent that will continue it. Use these sections:

## Goals
What the user wants overall, and the current request in the user's own words.
## Decisions
What was decided or agreed, and constraints the user stated.
## Files touched
Every file read, created, edited or deleted, with what was done to it.
## Open questions
Anything unresolved or waiting for the user.
## What remains
The next steps, in order.

Be concrete (names, paths, commands, numbers). Do not invent anything. Answer with the summary only."""

SUMMARY_HEADER = (
    "[My notes: a summary of the earlier conversation, which I wrote when it was compacted to fit the context "
    "window. They are my own words, not the user's.]\n"
)
SUMMARY_STUB = "(The earlier conversation was compacted; your summary of it follows.)"
SUMMARY_INPUT_SHARE = 0.6  # of the window: how much transcript the summary request may carry
MIN_SUMMARISED_SHARE = 0.2  # of the window: less than this to summarise is not worth a model call
TOOL_TEXT_CHARS = 1500  # a tool call's arguments or result, cut to this in the transcript


@dataclass(eq=False)
class CompactionOutcome:
    """What one compaction did (or why it did not)."""

    record: CompactionRecord | None
    usage: Usage | None
    error: str | None = None


def view(messages: Sequence[Message], latest: CompactionRecord | None) -> list[Message]:
    """What the model sees of ``messages`` after the compaction ``latest``: a short user turn, the summary as the
    assistant's own notes (so nothing in it reads as the user's words), then the kept messages. Every wire accepts
    this: the conversation still opens with a user turn, and an assistant message that comes next takes the
    notes in front of its own content instead of a second assistant turn."""
    if latest is None:
        return list(messages)
    notes = TextBlock(SUMMARY_HEADER + latest.summary)
    kept = list(messages[latest.keep_from :])
    if kept and kept[0].role == "assistant":
        return [Message.user(SUMMARY_STUB), Message("assistant", [notes, *kept[0].content]), *kept[1:]]
    return [Message.user(SUMMARY_STUB), Message("assistant", [notes]), *kept]


def cut_points(messages: Sequence[Message], after: int) -> list[int]:
    """Where the kept part may start: before a user or assistant message (never between a call and its result),
    after ``after``."""
    return [i for i in range(after + 1, len(messages)) if messages[i].role in ("user", "assistant")]


def choose_keep_from(messages: Sequence[Message], after: int, keep_bytes: int, keep_last: bool = True) -> int | None:
    """The earliest cut point whose tail fits in ``keep_bytes`` (at least the last exchange is kept when
    ``keep_last``, else the end is a cut point too); None when nothing new would be summarised."""
    points = cut_points(messages, after)
    if not keep_last:
        points.append(len(messages))
    if not points:
        return None
    sizes = [message_bytes(m) for m in messages]
    tail = sum(sizes[points[0] :])
    previous = points[0]
    for point in points:
        tail -= sum(sizes[previous:point])
        previous = point
        if tail <= keep_bytes:
            return point
    return points[-1]


def transcript_for_summary(messages: Sequence[Message], previous: str | None, max_bytes: int) -> str:
    """The messages as plain text for the summary request, newest kept when it must be cut to ``max_bytes``."""
    parts: list[str] = []
    if previous:
        parts.append(f"[Summary of what came before]\n{previous}")
    for m in messages:
        for block in m.content:
            if isinstance(block, TextBlock) and block.text:
                parts.append(f"{m.role}: {block.text}")
            elif isinstance(block, ToolUseBlock):
                parts.append(f"assistant called {block.name}({_cut(block.arguments)})")
            elif isinstance(block, ToolResultBlock):
                mark = "error" if block.is_error else "result"
                parts.append(f"{block.tool_name} {mark}: {_cut(block.content)}")
    text = "\n\n".join(parts)
    encoded = text.encode("utf-8")
    if len(encoded) <= max_bytes:
        return text
    tail = encoded[len(encoded) - max_bytes :].decode("utf-8", "ignore")
    return "[the oldest part of the conversation is omitted]\n" + tail


def _cut(text: str) -> str:
    return text if len(text) <= TOOL_TEXT_CHARS else text[:TOOL_TEXT_CHARS] + f"… [{len(text)} characters]"


class Compactor:
    """Compaction for one session's turn: decides when, asks for the summary, builds what the model sees."""

    def __init__(
        self,
        settings: CompactionConfig,
        window: int | None,
        summarizer: Callable[[], LlmClient],
        model: str,
        latest: CompactionRecord | None = None,
    ) -> None:
        self.settings, self.window = settings, window
        self.summarizer, self.model = summarizer, model  # the client is made only when a summary is needed
        self.latest = latest
        self.failed = False  # one failed summary per turn: then fitting takes over

    def view(self, history: Sequence[Message]) -> list[Message]:
        return view(history, self.latest)

    def request(
        self,
        history: list[Message],
        system: Message | None,
        tools: Sequence[Tool],
        bytes_per_token: float,
        cancel: CancelToken,
        on_event: OnEvent,
    ) -> tuple[list[Message], Usage | None]:
        """What to send for ``history``, compacting first when it would pass the threshold; the summary call's usage
        (None when there was none)."""
        current = self.view(history)
        if not self.settings.enabled or self.window is None or self.failed:
            return current, None
        fixed = tools_bytes(tools) + (message_bytes(system) if system is not None else 0)
        size = fixed + sum(message_bytes(m) for m in current)
        if size <= self.window * self.settings.compact_at * bytes_per_token:
            return current, None
        outcome = self.compact(history, bytes_per_token, cancel, on_event, fixed=fixed)
        return self.view(history), outcome.usage

    def compact(
        self,
        history: list[Message],
        bytes_per_token: float,
        cancel: CancelToken,
        on_event: OnEvent,
        fixed: int = 0,
        manual: bool = False,
    ) -> CompactionOutcome:
        """Summarise everything before the recent turns; emits a Compaction event either way."""
        window = self.window or 0
        after = self.latest.keep_from if self.latest is not None else 0
        keep_bytes = max(0, int(window * self.settings.keep_recent * bytes_per_token) - fixed) if window else 0
        keep_from = choose_keep_from(history, after, keep_bytes, keep_last=not manual)
        summarised = sum(message_bytes(m) for m in history[after : keep_from or after])
        if keep_from is None or (not manual and summarised < window * MIN_SUMMARISED_SHARE * bytes_per_token):
            reason = "nothing worth summarising yet: the conversation is mostly its latest exchange"
            if manual:
                return self._failed(on_event, reason, manual)
            self.failed = True  # this turn goes on with fitting, quietly
            return CompactionOutcome(None, None, reason)
        max_input = int(window * SUMMARY_INPUT_SHARE * bytes_per_token) if window else 400_000
        text = transcript_for_summary(history[after:keep_from], self.latest.summary if self.latest else None, max_input)
        request = [Message.system(SUMMARY_SYSTEM), Message.user(f"{text}\n\n---\n\n{SUMMARY_PROMPT}")]
        try:
            choice = self.summarizer().stream(request, [], lambda chunk: None, cancel)
        except Cancelled:
            raise
        except OpenheimError as e:
            return self._failed(on_event, f"the summary request failed: {e}", manual)
        if cancel.cancelled:
            raise Cancelled()
        summary = (choice.message.text() or "").strip()
        if not summary:
            return self._failed(on_event, "the model returned an empty summary", manual, choice.usage)
        record = CompactionRecord(len(history), keep_from, summary, self.model, choice.usage, manual)
        self.latest = record
        on_event(events.Compaction(record.at, keep_from, summary, self.model, choice.usage, manual))
        return CompactionOutcome(record, choice.usage)

    def _failed(self, on_event: OnEvent, reason: str, manual: bool, usage: Usage | None = None) -> CompactionOutcome:
        self.failed = True
        log.info("compaction did not happen: %s", reason)
        on_event(events.Compaction(0, 0, "", self.model, usage, manual, reason))
        return CompactionOutcome(None, usage, reason)
