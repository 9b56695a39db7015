"""StreamEvents as ACP session updates: the one mapping every ACP transport and embedder uses."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

from openheim.acp.convert import replay, text_chunk
from openheim.acp.long_commands import compaction_update
from openheim.acp.toolcalls import (
    Present,
    ToolCallTracker,
    subagent_call_id,
    subagent_meta,
)
from openheim.core import events

if TYPE_CHECKING:
    from openheim.core.events import StreamEvent
    from openheim.core.models import Message, Usage
    from openheim.runtime.session import Session

log = logging.getLogger(__name__)


class AcpUpdates:
    """Feed it a turn's events; it sends the matching ``session/update`` payloads to ``send``.

    Text and thinking become message and thought chunks, tool calls are announced, started and
    closed through a ToolCallTracker, usage becomes ``usage_update`` when the context window is
    known; events with no ACP equivalent are dropped.
    """

    def __init__(
        self, send: Callable[[dict], None], present: Present | None = None, context_window: int | None = None
    ) -> None:
        self.send = send
        self.tracker = ToolCallTracker(send, present)
        self.context_window = context_window

    def __call__(self, event: StreamEvent) -> None:
        try:
            self._convert(event)
        except Exception:  # a display problem must never end the turn
            log.exception("could not turn a %s event into an ACP update", event.kind)

    def _convert(self, event: StreamEvent) -> None:
        if isinstance(event, events.LlmResponse):
            if event.content:
                self.send(text_chunk("agent_message_chunk", event.content))
        elif isinstance(event, events.ThinkingContent):
            if event.content:
                self.send(text_chunk("agent_thought_chunk", event.content))
        elif isinstance(event, events.ToolCall):
            self.tracker.opened(event.id, event.tool_name, event.arguments, view=event.view)
        elif isinstance(event, events.ToolResult):
            self.tracker.closed(event.id, event.result, event.is_error)
        elif isinstance(event, events.SubagentEvent):
            self._subagent(event)
        elif isinstance(event, events.PlanUpdate):
            self.send(
                {
                    "sessionUpdate": "plan",
                    "entries": [
                        {"content": e["step"], "priority": "medium", "status": e["status"]} for e in event.entries
                    ],
                }
            )
        elif isinstance(event, events.Compaction):
            self.send(compaction_update(event))
        elif isinstance(event, events.Notice):
            self.send(notice_update(event))
        elif isinstance(event, events.UsageReport) and self.context_window:
            usage = event.usage
            update: dict = {
                "sessionUpdate": "usage_update",
                "used": usage.prompt_tokens + usage.output_tokens,
                "size": self.context_window,
                "_meta": {"openheim": {"usage": acp_usage(usage)}},
            }
            if event.total_cost is not None:  # the model has a price: what the session has spent
                update["cost"] = {"amount": round(event.total_cost, 6), "currency": "USD"}
            self.send(update)

    def _subagent(self, event: events.SubagentEvent) -> None:
        """A delegated agent's tool call: its own tool_call, tied to the parent's call by ``_meta``."""
        inner = event.event
        if isinstance(inner, events.UsageReport):
            return  # its tokens are in the prompt response's _meta usage; the context is the parent's
        call_id = subagent_call_id(event.subagent, event.parent_tool_call_id, inner.id)
        if isinstance(inner, events.ToolCall):
            meta = subagent_meta(event.subagent, event.parent_tool_call_id)
            self.tracker.opened(call_id, inner.tool_name, inner.arguments, event.subagent, meta, inner.view)
        else:
            self.tracker.closed(call_id, inner.result, inner.is_error)

    def close(self, reason: str) -> None:
        """Fail every tool call still open (the turn was cancelled or failed)."""
        self.tracker.close_all(reason)


def notice_update(event: events.Notice) -> dict:
    """A notice (``starting MCP servers: time, git``) as a thought chunk, with its level under ``_meta``.

    Of the stable schema's updates, only a message or thought chunk is shown as text by every client: a message
    chunk would become part of the answer, ``plan`` would replace the model's plan, ``session_info_update`` carries
    only a title, and the unstable ``notice`` update is rejected by clients on the stable schema. A thought is
    shown apart from the answer, as compactions are."""
    update = text_chunk("agent_thought_chunk", f"[{event.text}]\n")
    update["_meta"] = {"openheim/notice": {"level": event.level}}
    return update


def acp_updates(session: Session, send: Callable[[dict], None]) -> AcpUpdates:
    """An ``on_event`` for ``session.prompt``/``start_turn`` that maps the session's events to ACP
    ``session/update`` payloads for ``send`` (events with no ACP equivalent are dropped)."""
    return AcpUpdates(
        send, lambda name, args: session.present(name, args, with_diff=True), session.config.context_window
    )


def acp_replay(session: Session, messages: list[Message], send: Callable[[dict], None]) -> None:
    """Send a stored conversation to ``send`` as the ACP updates a live turn would have sent."""

    for update in replay(messages, session.present):
        send(update)


def acp_usage(usage: Usage) -> dict[str, int]:
    """Token counts in the shape of ACP's (unstable) prompt-response ``usage``: cache reads and writes apart."""
    return {
        "totalTokens": usage.total,
        "inputTokens": usage.input_tokens,
        "outputTokens": usage.output_tokens,
        "cachedReadTokens": usage.cache_read_tokens,
        "cachedWriteTokens": usage.cache_creation_tokens,
    }
