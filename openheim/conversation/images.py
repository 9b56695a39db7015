"""Images of a conversation, stored once by content hash beside the logs (``history/images/{sha256}``).

A log line holds ``{"type": "image", "mime_type": ..., "sha256": ...}`` instead of the base64 data, so
an image costs its bytes once, however often the log is rewritten, and a log stays small to read.
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

from openheim.core.models import ImageBlock, Message

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
    directory.mkdir(parents=True, exist_ok=True)
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
    """The log line of ``message``: its JSON, with every image replaced by a reference to its stored bytes."""
    if not any(isinstance(b, ImageBlock) for b in message.content):
        return message.to_json().encode("utf-8")
    blocks = []
    for b in message.content:
        if isinstance(b, ImageBlock):
            blocks.append({"type": "image", "mime_type": b.mime_type, "sha256": store(directory, b)})
        else:
            blocks.append(b.to_dict())
    return json.dumps({"role": message.role, "content": blocks}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")


def inline(doc: object, directory: Path) -> object:
    """A parsed log line with each image reference replaced by the image (a text note when it is gone)."""
    content = doc.get("content") if isinstance(doc, dict) else None
    if not isinstance(content, list):
        return doc
    for i, block in enumerate(content):
        if not (isinstance(block, dict) and block.get("type") == "image" and "sha256" in block):
            continue
        sha = block.get("sha256")
        data = _read(directory, sha) if isinstance(sha, str) and re.match(_SHA, sha) else None
        if data is None:
            content[i] = {"type": "text", "text": f"[an image that is no longer stored ({str(sha)[:12]})]"}
        else:
            content[i] = {"type": "image", "mime_type": block.get("mime_type") or "image/png",
                          "data": base64.b64encode(data).decode("ascii")}
    return doc


def _read(directory: Path, sha: str) -> bytes | None:
    try:
        return (directory / sha).read_bytes()
    except OSError as e:
        log.warning("image %s of a conversation cannot be read (%s)", sha[:12], e.strerror or e)
        return None
