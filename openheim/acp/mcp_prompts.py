"""The prompts of a session's MCP servers as ACP slash commands: ``/server.name name=value ...`` is expanded
(prompts/get) into the turn's prompt before it reaches the model."""
from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any

from openheim.core.models import TextBlock

if TYPE_CHECKING:
    from openheim.client import SessionHandle
    from openheim.core.models import ContentBlock

log = logging.getLogger(__name__)


def commands(session: SessionHandle, wait: float = 0.0) -> list[dict[str, Any]]:
    """One available command per prompt: its name ``server.name``, its description, its arguments as the hint."""
    try:
        prompts = session.mcp_prompts(wait)
    except Exception as e:  # a closed session or a server in trouble must not break the announcement
        log.info("could not list the MCP prompts of %s: %s", session.id, e)
        return []
    found = []
    for prompt in prompts:
        command: dict[str, Any] = {"name": prompt.command,
                                   "description": prompt.description or f"MCP prompt {prompt.ref}"}
        if prompt.arguments:
            command["input"] = {"hint": prompt.usage()}
        found.append(command)
    return found


def parse(session: SessionHandle, blocks: list[ContentBlock]) -> tuple[str, str] | None:
    """(command, arguments) when the prompt's first block is ``/server.name ...`` naming one of the session's
    MCP prompts."""
    first = blocks[0] if blocks else None
    if not isinstance(first, TextBlock) or not first.text.startswith("/"):
        return None
    match = re.match(r"/(\S+)\s*(.*)\Z", first.text, re.S)
    if match is None:
        return None
    name, rest = match.group(1), match.group(2)
    if "." not in name:  # every prompt's command has one; skills and built-in commands have none
        return None
    try:
        known = {p.command for p in session.mcp_prompts()}
    except Exception:
        return None
    return (name, rest.strip()) if name in known else None
