"""Small conversions every provider wire shares: tool-call ids, tool arguments, system text."""

from __future__ import annotations

import json
import logging
import uuid
from typing import TYPE_CHECKING

from openheim.core.models import TextBlock, ThinkingBlock

if TYPE_CHECKING:
    from openheim.core.models import ContentBlock, Message, ToolUseBlock

log = logging.getLogger(__name__)


def new_call_id() -> str:
    """An id for a tool call the provider sent without one: ``call_`` + 32 hex digits."""
    return "call_" + uuid.uuid4().hex


def arguments_object(arguments: str) -> dict:
    """Stored tool arguments as the JSON object a provider expects; anything else becomes ``{}``."""
    if arguments and arguments.strip():
        try:
            value = json.loads(arguments)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        log.warning("tool arguments are not a JSON object; sending {} instead: %s", arguments[:200])
    return {}


def arguments_text(arguments: str) -> str:
    """Stored tool arguments as JSON object text: passed through when valid, else ``{}``."""
    if arguments and arguments.strip():
        try:
            if isinstance(json.loads(arguments), dict):
                return arguments
        except ValueError:
            pass
        log.warning("tool arguments are not a JSON object; sending {} instead: %s", arguments[:200])
    return "{}"


def system_text(messages: list[Message]) -> str:
    """All system messages' text joined by a blank line."""
    return "\n\n".join(t for m in messages if m.role == "system" and (t := m.text()))


def json_text(value: object) -> str:
    """Compact JSON text (non-ASCII kept as is)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def reply_blocks(thinking: list[str], text: list[str], calls: list[ToolUseBlock]) -> list[ContentBlock]:
    """An assembled reply's content in the stored order: thinking, text, tool calls (empty parts left out)."""
    content: list[ContentBlock] = []
    if joined := "".join(thinking):
        content.append(ThinkingBlock(joined))
    if joined := "".join(text):
        content.append(TextBlock(joined))
    return content + calls
