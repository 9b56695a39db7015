"""A tools/call result (wire JSON) flattened to the text the model reads, its images attached."""

from __future__ import annotations

import json

from openheim.core.models import ImageBlock
from openheim.core.tool_images import ResultText, checked_image, image_note

ERROR_IMAGE = "a failed call's result is sent as text"


def block_text(block: object) -> str:
    """One content block: text as is; an embedded text resource as its URI and text; images (unchecked: see
    ``result_text``), audio, blobs and resource links as a bracketed note with their URI and type."""
    if not isinstance(block, dict):
        return ""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        return f"[{kind}: {block.get('mimeType') or 'unknown'}]"
    if kind == "resource":
        resource = block.get("resource") or {}
        uri, mime = resource.get("uri", ""), resource.get("mimeType") or "unknown"
        if "text" in resource:
            return f"[resource {uri} ({mime})]\n{resource.get('text', '')}"
        return f"[blob: {uri} ({mime}); binary content not shown]"
    if kind == "resource_link":
        name = block.get("name") or block.get("title")
        described = f" {name}" if name else ""
        return f"[resource link{described}: {block.get('uri', '')} ({block.get('mimeType') or 'unknown'})]"
    return f"[{kind}]"


def result_text(result: dict) -> str:
    """Blocks joined by newlines, each usable image attached (a ``ResultText``) and noted as such, any other
    (and every image of an ``isError`` result, which becomes an error text) noted as not sent; structured
    content (as JSON) when there are no blocks."""
    blocks = result.get("content") or []
    if blocks:
        lines: list[str] = []
        images: list[ImageBlock] = []
        for block in blocks:
            if isinstance(block, dict) and block.get("type") == "image":
                verdict = ERROR_IMAGE if result.get("isError") else checked_image(block.get("data"))
                lines.append(image_note(str(block.get("mimeType") or "unknown"), verdict))
                if isinstance(verdict, ImageBlock):
                    images.append(verdict)
            else:
                lines.append(block_text(block))
        text = "\n".join(lines)
        return ResultText(text, images) if images else text
    structured = result.get("structuredContent")
    if structured is not None:
        return json.dumps(structured, ensure_ascii=False)
    return ""
