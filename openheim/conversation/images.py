"""Images of a conversation, stored once by content hash beside the logs (``history/images/{sha256}``).

A log line holds ``{"type": "image", "mime_type": ..., "sha256": ...}`` instead of the base64 data (also in a
tool result's ``images``), so an image costs its bytes once, however often the log is rewritten, and a log
stays small to read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import logging
import os
import re
import tempfile
from pathlib import Path

from openheim.config.private_data import make_private
from openheim.core.models import ImageBlock, Message, ToolResultBlock

log = logging.getLogger(__name__)

IMAGES = "images"
_SHA = r"^[0-9a-f]{64}$"  # compiled on first use (re caches it)


def store(directory: Path, block: ImageBlock) -> str:
    """Write the image's bytes to ``directory/{sha256}`` (once) and return the hash."""
    try:
        raw = base64.b64decode(block.data, validate=False)
    except (binascii.Error, ValueError):
        raw = block.data.encode("utf-8")
    sha = hashlib.sha256(raw).hexdigest()
    path = directory / sha
    if path.exists():
        return sha
    make_private(directory)
    fd, tmp = tempfile.mkstemp(prefix=f".{sha[:8]}.", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return sha


def line(message: Message, directory: Path) -> bytes:
    """The log line of ``message``: its JSON, with every image (a tool result's too) replaced by a reference to
    its stored bytes."""
    if not any(isinstance(b, ImageBlock) or (isinstance(b, ToolResultBlock) and b.images) for b in message.content):
        return message.to_json().encode("utf-8")
    blocks = []
    for b in message.content:
        if isinstance(b, ImageBlock):
            blocks.append(_reference(b, directory))
        elif isinstance(b, ToolResultBlock) and b.images:
            blocks.append({**b.to_dict(), "images": [_reference(i, directory) for i in b.images]})
        else:
            blocks.append(b.to_dict())
    return json.dumps({"role": message.role, "content": blocks}, ensure_ascii=False, separators=(",", ":")).encode(
        "utf-8"
    )


def _reference(block: ImageBlock, directory: Path) -> dict:
    return {"type": "image", "mime_type": block.mime_type, "sha256": store(directory, block)}


def inline(doc: object, directory: Path) -> object:
    """A parsed log line with each image reference replaced by the image (a text note when it is gone); a tool
    result's images too (a gone one noted in the result's text)."""
    content = doc.get("content") if isinstance(doc, dict) else None
    if not isinstance(content, list):
        return doc
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "image" and "sha256" in block:
            content[i] = _loaded(block, directory)
        elif block.get("type") == "tool_result" and isinstance(block.get("images"), list):
            loaded = [_loaded(b, directory) if isinstance(b, dict) and "sha256" in b else b for b in block["images"]]
            gone = [b["text"] for b in loaded if isinstance(b, dict) and b.get("type") == "text"]
            block["images"] = [b for b in loaded if not (isinstance(b, dict) and b.get("type") == "text")]
            if gone and isinstance(block.get("content"), str):
                block["content"] = "\n".join([block["content"], *gone])
    return doc


def _loaded(reference: dict, directory: Path) -> dict:
    """The image a reference names, or a text block saying it is no longer stored."""
    sha = reference.get("sha256")
    data = _read(directory, sha) if isinstance(sha, str) and re.match(_SHA, sha) else None
    if data is None:
        return {"type": "text", "text": f"[an image that is no longer stored ({str(sha)[:12]})]"}
    return {
        "type": "image",
        "mime_type": reference.get("mime_type") or "image/png",
        "data": base64.b64encode(data).decode("ascii"),
    }


def _read(directory: Path, sha: str) -> bytes | None:
    try:
        return (directory / sha).read_bytes()
    except OSError as e:
        log.warning("image %s of a conversation cannot be read (%s)", sha[:12], e.strerror or e)
        return None
