"""ACP content blocks to our ContentBlocks, and stored history back to session/update replays."""

from __future__ import annotations

from collections.abc import Iterator

from openheim.acp.toolcalls import Present, text_content, tool_call_object
from openheim.acp.util import invalid_params
from openheim.core.models import (
    ContentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from openheim.core.tools import parse_arguments

INTERRUPTED = "No result: the turn was interrupted before this tool call finished."


def prompt_blocks(prompt: list) -> list[ContentBlock]:
    """The prompt's ACP blocks as ours; anything we cannot use is a -32602 with the reason."""
    if not prompt:
        raise invalid_params("'prompt' must contain at least one content block")
    return [_block(b, i) for i, b in enumerate(prompt)]


def _block(block: object, index: int) -> ContentBlock:
    if not isinstance(block, dict):
        raise invalid_params(f"prompt[{index}] must be a content block object")
    kind = block.get("type")
    if kind == "text" and isinstance(block.get("text"), str):
        return TextBlock(block["text"])
    if kind == "image" and isinstance(block.get("data"), str) and isinstance(block.get("mimeType"), str):
        return ImageBlock(block["data"], block["mimeType"])
    if kind == "resource_link" and isinstance(block.get("uri"), str):
        return TextBlock(_link_text(block))
    if kind == "resource" and isinstance(block.get("resource"), dict):
        return _embedded(block["resource"], index)
    if kind == "audio":
        raise invalid_params("audio prompt content is not supported; send text or images")
    if kind in ("text", "image", "resource_link", "resource"):
        raise invalid_params(f"prompt[{index}] is a malformed '{kind}' block")
    raise invalid_params(f"unsupported prompt content type {kind!r} in prompt[{index}]")


def uri_path(uri: str) -> str | None:
    """The local path of a file:// URI, else None."""
    from urllib.parse import unquote, urlsplit

    parts = urlsplit(uri)
    if parts.scheme != "file":
        return None
    return unquote(parts.path) or None


def _link_text(block: dict) -> str:
    uri, name = block["uri"], block.get("name") or block["uri"]
    path = uri_path(uri)
    if path:
        return f"[referenced file: {name} at {path}; read it with read_file if you need its content]"
    return f"[referenced resource: {name} ({uri})]"


def _embedded(resource: dict, index: int) -> ContentBlock:
    uri = resource.get("uri")
    if not isinstance(uri, str):
        raise invalid_params(f"prompt[{index}].resource needs a 'uri'")
    if isinstance(resource.get("text"), str):
        where = uri_path(uri) or uri
        return TextBlock(f'<context source="{where}">\n{resource["text"]}\n</context>')
    mime = resource.get("mimeType") or ""
    if isinstance(resource.get("blob"), str) and mime.startswith("image/"):
        return ImageBlock(resource["blob"], mime)
    raise invalid_params(
        f"prompt[{index}] embeds a binary resource ({mime or 'unknown type'}); "
        "only text and image resources are supported"
    )


def chunk(kind: str, block: dict) -> dict:
    return {"sessionUpdate": kind, "content": block}


def text_chunk(kind: str, text: str) -> dict:
    return chunk(kind, {"type": "text", "text": text})


# --- history replay ------------------------------------------------------------------


def replay(messages: list[Message], present: Present) -> Iterator[dict]:
    """The whole stored conversation as the updates a live turn would have sent, in order."""
    open_calls: dict[str, ToolUseBlock] = {}
    for message in messages:
        if message.role == "system":
            continue
        if message.role != "tool":
            yield from _close_unanswered(open_calls)  # results always follow their calls directly
        for block in message.content:
            yield from _replay_block(message.role, block, present, open_calls)
    yield from _close_unanswered(open_calls)


def _replay_block(
    role: str, block: ContentBlock, present: Present, open_calls: dict[str, ToolUseBlock]
) -> Iterator[dict]:
    speaker = "user_message_chunk" if role == "user" else "agent_message_chunk"
    if isinstance(block, TextBlock) and block.text:
        yield text_chunk(speaker, block.text)
    elif isinstance(block, ImageBlock):
        yield chunk(speaker, {"type": "image", "data": block.data, "mimeType": block.mime_type})
    elif isinstance(block, ThinkingBlock) and block.thinking:
        yield text_chunk("agent_thought_chunk", block.thinking)
    elif isinstance(block, ToolUseBlock):
        open_calls[block.id] = block
        yield _replayed_call(block, present)
    elif isinstance(block, ToolResultBlock) and block.tool_call_id in open_calls:
        open_calls.pop(block.tool_call_id)
        yield _replayed_result(block.tool_call_id, block.content, block.is_error)


def _replayed_call(block: ToolUseBlock, present: Present) -> dict:
    args = parse_arguments(block.arguments)
    return {"sessionUpdate": "tool_call", **tool_call_object(block.id, present(block.name, args), args, "in_progress")}


def _replayed_result(call_id: str, content: str, is_error: bool) -> dict:
    return {
        "sessionUpdate": "tool_call_update",
        "toolCallId": call_id,
        "status": "failed" if is_error else "completed",
        "content": [text_content(content)],
    }


def _close_unanswered(open_calls: dict[str, ToolUseBlock]) -> Iterator[dict]:
    for call_id in list(open_calls):
        open_calls.pop(call_id)
        yield _replayed_result(call_id, INTERRUPTED, True)
